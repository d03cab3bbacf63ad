import { parseArgs } from 'node:util';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import {
  createAgent,
  createMerchant,
  disableAgent,
  enableAgent,
  issueOperatorVisitorToken,
  LEVELS,
  MERCHANT_SETTING_KEYS,
  publishTestEvent,
  resetAgentPassword,
  revokeOperatorVisitorToken,
  type SessionTerminator,
  setMerchantSetting,
} from '../resolvers/admin.js';
import { purgeUploads } from '../resolvers/attachments/purge.js';

/** Where a command writes: its result (JSON) to `out`, notes for the operator to `err`. */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
}

export interface CommandContext {
  deps: Deps;
  sessions: SessionTerminator;
  /** The environment, for `event:publish --url` (INTERNAL_API_TOKEN). */
  env: NodeJS.ProcessEnv;
  io: CliIO;
}

type Options = Record<string, { type: 'string' | 'boolean'; description: string }>;

interface Command {
  summary: string;
  options: Options;
  run(ctx: CommandContext, values: Record<string, string | boolean | undefined>): Promise<unknown>;
}

const opt = (description: string) => ({ type: 'string' as const, description });
/**
 * Option values as parseArgs gives them (a string, a boolean or nothing) handed to a domain
 * function, which parses them at its door with its own schema: a missing or wrong value is its
 * BAD_USER_INPUT, worded as for every other adapter.
 */
const unchecked = (values: Record<string, unknown>) => values as never;
const flag = (description: string) => ({ type: 'boolean' as const, description });

/** Sessions live in the server process when there is no Redis: say what that means. */
function noteEmbeddedSessions(ctx: CommandContext) {
  if (!ctx.deps.redis) {
    ctx.io.err(
      'note: no REDIS_URL, so Sessions live inside the running server, not here; each ends at its next request (the account is checked on every request).',
    );
  }
}

/** The operator commands. Each is a thin adapter over src/resolvers/admin.ts. */
const COMMANDS: Record<string, Command> = {
  'merchant:create': {
    summary: 'Create a merchant; prints its appkey and identity secret (shown once).',
    options: {
      bid: opt('business id, e.g. acme (channel global-{bid})'),
      name: opt('display name (appname)'),
      appkey: opt('public appkey (default: generated)'),
      verified: flag('mark the merchant verified'),
    },
    run: ({ deps }, v) =>
      createMerchant(deps, unchecked({ bid: v.bid, appname: v.name, appkey: v.appkey, verified: v.verified })),
  },
  'merchant:set': {
    summary:
      "Change one of a merchant's settings (switch on|off|unset, upload limit in bytes, chat setting, appname); every running instance answers the new value at once.",
    options: {
      bid: opt('merchant bid'),
      key: opt(`one of: ${MERCHANT_SETTING_KEYS.join(', ')}`),
      value: opt('the new value'),
    },
    run: ({ deps }, v) => setMerchantSetting(deps, unchecked({ bid: v.bid, key: v.key, value: v.value })),
  },
  'agent:create': {
    summary: 'Create an agent of a merchant; prints the generated password when none is given.',
    options: {
      bid: opt('merchant bid'),
      username: opt('login name'),
      password: opt('password (default: generated and printed once)'),
      nickname: opt('display name (default: the username)'),
      level: opt(`role: ${LEVELS.join(', ')} (default: agent)`),
      group: opt('agent group name (default: the merchant default group)'),
    },
    run: ({ deps }, v) =>
      createAgent(
        deps,
        unchecked({
          bid: v.bid,
          username: v.username,
          password: v.password,
          nickname: v.nickname,
          level: v.level,
          group: v.group,
        }),
      ),
  },
  'agent:disable': {
    summary: 'Disable an agent and end all its Sessions (its live subscriptions get session.ended).',
    options: { username: opt('login name') },
    run: async (ctx, v) => {
      noteEmbeddedSessions(ctx);
      return disableAgent(ctx.deps, unchecked({ username: v.username }), ctx.sessions);
    },
  },
  'agent:enable': {
    summary: 'Enable a disabled agent again.',
    options: { username: opt('login name') },
    run: ({ deps }, v) => enableAgent(deps, unchecked({ username: v.username })),
  },
  'agent:password': {
    summary: 'Reset an agent password (generated and printed once when none is given) and end its Sessions.',
    options: { username: opt('login name'), password: opt('new password (default: generated)') },
    run: async (ctx, v) => {
      noteEmbeddedSessions(ctx);
      return resetAgentPassword(ctx.deps, unchecked({ username: v.username, password: v.password }), ctx.sessions);
    },
  },
  'visitor-token:issue': {
    summary: 'Issue a visitor token: anonymous, or for --user-id signed with the merchant identity secret.',
    options: {
      appkey: opt('merchant appkey'),
      'user-id': opt("the merchant's own user id (identified visitor: same uid every time)"),
      nickname: opt('visitor nickname'),
      lang: opt('language code, e.g. en or zh-CN'),
    },
    run: ({ deps }, v) =>
      issueOperatorVisitorToken(
        deps,
        unchecked({ appkey: v.appkey, userId: v['user-id'], nickname: v.nickname, lang: v.lang }),
      ),
  },
  'visitor-token:revoke': {
    summary: 'Revoke a visitor token.',
    options: { token: opt('the visitor token') },
    run: ({ deps }, v) => revokeOperatorVisitorToken(deps, unchecked({ token: v.token })),
  },
  'attachments:purge': {
    summary:
      'Remove every upload of one uploader of a merchant (rows and stored objects, sent as messages or not); messages keep their text and lose the attachment.',
    options: {
      bid: opt('merchant bid'),
      visitor: opt('the visitor uid'),
      agent: opt('the agent login name'),
    },
    run: ({ deps }, v) =>
      purgeUploads(deps, {
        bid: (v.bid as string | undefined) ?? '',
        visitor: v.visitor as string | undefined,
        agent: v.agent as string | undefined,
      }),
  },
  'event:publish': {
    summary:
      'Publish a test event on a channel: through Redis when REDIS_URL is set, else through a running gateway (--url, with INTERNAL_API_TOKEN).',
    options: {
      channel: opt('channel, e.g. global-demo or agent-a_alice'),
      event: opt('event name (default: test.event)'),
      data: opt('JSON payload (default: {})'),
      url: opt('gateway base URL: publish through its POST /internal/events'),
    },
    run: async (ctx, v) => {
      let data: unknown = {};
      if (typeof v.data === 'string') {
        try {
          data = JSON.parse(v.data);
        } catch {
          throw new DomainError('BAD_USER_INPUT', 'data must be JSON');
        }
      }
      const input = { channel: v.channel, event: v.event ?? 'test.event', data };
      if (typeof v.url === 'string') return publishThroughGateway(v.url, ctx.env.INTERNAL_API_TOKEN, input);
      if (!ctx.deps.redis) {
        throw new DomainError(
          'BAD_USER_INPUT',
          'without REDIS_URL an event published here reaches no server: set REDIS_URL, or pass --url of a running gateway (with INTERNAL_API_TOKEN)',
        );
      }
      return publishTestEvent(ctx.deps, unchecked(input));
    },
  },
};

/** Commands that never touch the database (they skip opening it). */
export const NEEDS_NO_DATABASE = (command: string, argv: string[]) =>
  command === 'event:publish' && argv.some((a) => a === '--url' || a.startsWith('--url='));

async function publishThroughGateway(base: string, token: string | undefined, input: object) {
  if (!token) throw new DomainError('BAD_USER_INPUT', 'INTERNAL_API_TOKEN is required with --url');
  const res = await fetch(new URL('/internal/events', base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(input),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await res.json().catch(() => ({}))) as { code?: number; msg?: string; data?: { id?: string } };
  if (body.code !== 0)
    throw new DomainError('BAD_USER_INPUT', `the gateway refused: HTTP ${res.status} ${body.msg ?? ''}`);
  return { id: body.data?.id, ...input };
}

export function usage(): string {
  const lines = ['Usage: npm run cli -- <command> [--option value ...]', '', 'Commands:'];
  for (const [name, command] of Object.entries(COMMANDS)) {
    lines.push(`  ${name}`, `      ${command.summary}`);
    for (const [option, spec] of Object.entries(command.options)) {
      lines.push(`      --${option}${spec.type === 'string' ? ' <value>' : ''}  ${spec.description}`);
    }
  }
  lines.push(
    '',
    'The database and Redis are those of the environment (DATABASE_URL or PGLITE_DIR, REDIS_URL), as for the gateway.',
    'With the embedded database (PGLITE_DIR), stop the gateway first: PGlite is single-process.',
    'Results are printed as JSON on stdout; secrets in them (identity secret, generated passwords) are shown once.',
  );
  return lines.join('\n');
}

/**
 * Runs one command against open `deps`; resolves with the process exit code. Errors the
 * operator can fix (DomainError) are printed as `error: …` with exit code 1.
 */
export async function runCommand(ctx: CommandContext, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const command = name ? COMMANDS[name] : undefined;
  if (!command) {
    ctx.io.err(name && name !== 'help' && name !== '--help' ? `unknown command: ${name}\n\n${usage()}` : usage());
    return name && name !== 'help' && name !== '--help' ? 2 : 0;
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: rest, options: command.options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    ctx.io.err(`${(error as Error).message}\n\n${usage()}`);
    return 2;
  }
  try {
    const result = await command.run(ctx, values);
    ctx.io.out(JSON.stringify(result, null, 2));
    return 0;
  } catch (error) {
    if (error instanceof DomainError) {
      ctx.io.err(`error: ${error.message}`);
      return 1;
    }
    throw error;
  }
}
