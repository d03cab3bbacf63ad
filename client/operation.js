// @ts-check
/**
 * Turns a GraphQL library's subscription document into a resumable channel operation: the
 * `channel` field gets `since: $<variable>` (declared when missing) and selects `position` and
 * `event`, so the client can resubscribe after the last event it delivered. Shared by the Apollo
 * link and the urql exchange; needs `graphql` (both libraries depend on it).
 */
import { Kind, parse, print } from 'graphql';

/** @typedef {import('./index.js').ChannelOperation} ChannelOperation */

const SINCE_VARIABLE = 'parleySince';
/** Fields the client reads to resume and to hide its markers. */
const REQUIRED_FIELDS = ['position', 'event'];

/**
 * @param {import('graphql').DocumentNode | string} document
 * @param {Record<string, unknown> | undefined} variables
 * @param {string} [operationName]
 * @returns {ChannelOperation | undefined} undefined when the operation is not a subscription to `channel`.
 */
export function channelOperation(document, variables, operationName) {
  const doc = typeof document === 'string' ? parse(document) : document;
  const operations = doc.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  const operation = operations.find((d) => !operationName || d.name?.value === operationName) ?? operations[0];
  if (!operation || operation.operation !== 'subscription') return undefined;
  const field = operation.selectionSet.selections.find((s) => s.kind === Kind.FIELD && s.name.value === 'channel');
  if (!field || field.kind !== Kind.FIELD) return undefined;

  const sinceArgument = field.arguments?.find((a) => a.name.value === 'since');
  const vars = { ...variables };
  let sinceVariable = SINCE_VARIABLE;
  /** @type {import('graphql').ArgumentNode[]} */
  let args = [...(field.arguments ?? [])];
  /** @type {import('graphql').VariableDefinitionNode[]} */
  let definitions = [...(operation.variableDefinitions ?? [])];
  if (sinceArgument?.value.kind === Kind.VARIABLE) {
    sinceVariable = sinceArgument.value.name.value;
  } else {
    // A literal `since` (or none): the first subscription starts there, later ones from the last event.
    if (sinceArgument?.value.kind === Kind.STRING) vars[SINCE_VARIABLE] = sinceArgument.value.value;
    args = [...args.filter((a) => a !== sinceArgument), argument('since', SINCE_VARIABLE)];
    definitions = [...definitions, variableDefinition(SINCE_VARIABLE)];
  }
  const nameArgument = field.arguments?.find((a) => a.name.value === 'name');
  const name =
    nameArgument?.value.kind === Kind.VARIABLE
      ? vars[nameArgument.value.name.value]
      : nameArgument?.value.kind === Kind.STRING
        ? nameArgument.value.value
        : undefined;
  if (typeof name !== 'string') return undefined;

  const selected = new Set(
    (field.selectionSet?.selections ?? []).flatMap((s) => (s.kind === Kind.FIELD && !s.alias ? [s.name.value] : [])),
  );
  const selections = [
    ...(field.selectionSet?.selections ?? []),
    ...REQUIRED_FIELDS.filter((f) => !selected.has(f)).map(
      (f) => /** @type {const} */ ({ kind: Kind.FIELD, name: nameNode(f) }),
    ),
  ];
  const rewritten = {
    ...doc,
    definitions: doc.definitions.map((d) =>
      d !== operation
        ? d
        : {
            ...operation,
            variableDefinitions: definitions,
            selectionSet: {
              ...operation.selectionSet,
              selections: operation.selectionSet.selections.map((s) =>
                s !== field ? s : { ...field, arguments: args, selectionSet: { kind: Kind.SELECTION_SET, selections } },
              ),
            },
          },
    ),
  };
  return {
    query: print(/** @type {import('graphql').DocumentNode} */ (rewritten)),
    variables: vars,
    channel: name,
    responseKey: field.alias?.value ?? 'channel',
    sinceVariable,
  };
}

/** @param {string} value */
const nameNode = (value) => /** @type {const} */ ({ kind: Kind.NAME, value });

/** @param {string} name @param {string} variable */
const argument = (name, variable) =>
  /** @type {import('graphql').ArgumentNode} */ ({
    kind: Kind.ARGUMENT,
    name: nameNode(name),
    value: { kind: Kind.VARIABLE, name: nameNode(variable) },
  });

/** @param {string} variable */
const variableDefinition = (variable) =>
  /** @type {import('graphql').VariableDefinitionNode} */ ({
    kind: Kind.VARIABLE_DEFINITION,
    variable: { kind: Kind.VARIABLE, name: nameNode(variable) },
    type: { kind: Kind.NAMED_TYPE, name: nameNode('String') },
  });
