// @ts-check
import { declareValuePlugin, PluginKind } from '@stryker-mutator/api/plugin';

const LOG_LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);

/** The name of a property key or member (`description`, `log`), if it is a plain one. */
const nameOf = (/** @type {any} */ node) =>
  node?.type === 'Identifier' ? node.name : node?.type === 'StringLiteral' ? node.value : undefined;

/**
 * Mutants that cannot change behaviour, whatever the tests: the text of a `description`
 * (documentation of an event, an input or a schema entry; read by people, not by code) and the
 * arguments of a log call (`deps.log.warn(...)`, `log.info(...)`). Removing the call itself is
 * still mutated where it is a statement of its own block.
 */
export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'documentation-and-logs', {
    shouldIgnore(path) {
      if (path.isObjectProperty() && nameOf(path.node.key) === 'description') {
        return 'Documentation text: read by people, not by code';
      }
      if (path.isCallExpression() && path.node.callee.type === 'MemberExpression') {
        const { object, property } = path.node.callee;
        const logger = object.type === 'MemberExpression' ? nameOf(object.property) : nameOf(object);
        if (logger === 'log' && LOG_LEVELS.has(nameOf(property) ?? ''))
          return 'Log text: changes what is logged, not what is done';
      }
      return undefined;
    },
  }),
];
