import { FEATURE_SWITCH_KEYS } from '../db/schema.js';
import { type ErrorCode, restErrorTable } from '../errors.js';
import { UPLOAD_LIMIT_KEYS } from '../resolvers/admin.js';
import { ATTRIBUTE_TYPES, SWITCH_VALUES } from '../resolvers/desk/settings.js';
import { eventNames } from '../resolvers/event-catalog.js';
import { TICKET_ENTRY_PATH, WORKBENCH_PATH } from '../resolvers/login.js';
import { WsCloseCode } from '../subscriptions/close-codes.js';
import { LOGIN_PAGE_PATH } from './routes.js';

/**
 * The constants the pages' scripts share with the server, generated from the server's own
 * declarations: the envelope codes of src/errors.ts, the WebSocket close codes, the event
 * catalog's names, the entry paths and the settings the admin page edits. Written to src/pages/assets/contract.js by
 * `npm run contract:print`; test/checks/contract.test.ts fails when that file is stale.
 */
export function renderContractModule(): string {
  const codes = Object.fromEntries(
    (Object.keys(restErrorTable) as ErrorCode[]).map((name) => [name, restErrorTable[name].code]),
  );
  const events = Object.fromEntries(eventNames.map((name) => [name, name]));
  const paths = { LOGIN: LOGIN_PAGE_PATH, WORKBENCH: WORKBENCH_PATH, TICKET_ENTRY: TICKET_ENTRY_PATH };
  const settings = {
    SWITCHES: FEATURE_SWITCH_KEYS,
    SWITCH_VALUES,
    UPLOAD_LIMITS: UPLOAD_LIMIT_KEYS,
    ATTRIBUTE_TYPES,
  };
  const constant = (name: string, doc: string, value: unknown) =>
    `/** ${doc} */\nexport const ${name} = Object.freeze(${JSON.stringify(value, null, 2)});\n`;
  return [
    '// @ts-check',
    '// Generated from the server’s declarations by `npm run contract:print` (src/pages/contract.ts): do not edit.',
    '',
    constant('CODES', 'Envelope `code` of each error (0 is success).', codes),
    constant('CLOSE', 'WebSocket close codes the gateway sends.', WsCloseCode),
    constant('EVENTS', 'Event names of the real-time channels.', events),
    constant('PATHS', 'Entry pages.', paths),
    constant(
      'SETTINGS',
      'The merchant settings the admin page edits: switches and their values, upload limits, attribute types.',
      settings,
    ),
  ].join('\n');
}
