import { z } from 'zod';
import { clientIp, wsAddressFor } from '../http/request.js';
import { requestSessionPort, SESSION_COOKIE } from '../http/session.js';
import { type CaptchaPurpose, issueCaptcha } from '../resolvers/captcha.js';
import { loginInput, smsCaptchaInput, smsVerifyInput } from '../resolvers/inputs.js';
import { login, logout } from '../resolvers/login.js';
import { sendSmsCaptcha, verifySmsCode } from '../resolvers/sms.js';
import { loadWorkbench, type Workbench } from '../resolvers/workbench.js';
import { type AnyRoute, jsonRoute, rawRoute } from './route.js';

/** The legacy `/agent/*` login and workbench endpoints (pages are in src/pages/). */

const captcha = (purpose: CaptchaPurpose, path: string, summary: string) =>
  rawRoute({
    method: 'get',
    path,
    identity: 'session',
    tag: 'Agent login',
    summary,
    description:
      'A JPEG whose answer is stored in the current browser Session (replacing any earlier one of the same purpose). Single-use; any query parameter (e.g. `rand`) is ignored.',
    raw: { contentType: 'image/jpeg', description: 'The captcha image; sets the Session cookie when there was none.' },
    async handle({ deps, req, res }) {
      const jpeg = await issueCaptcha(deps, requestSessionPort(req), purpose);
      res.set({ 'Content-Type': 'image/jpeg', 'Cache-Control': 'no-store' }).send(jpeg);
    },
  });

const workbenchChatting = z
  .record(
    z.string().regex(/^visitor/),
    z
      .object({
        id: z.string(),
        name: z.string(),
        type: z.string(),
        timestamp: z.number(),
        pinned_at: z.number(),
        unread_count: z.number().int(),
        bot: z.number().int(),
        account_state: z.string(),
        history_only_mine: z.boolean(),
        items: z.array(z.unknown()),
      })
      .strict(),
  )
  .openapi({ description: 'Ongoing conversations keyed `visitor<uid>`.' });

const workbenchData = z
  .object({
    chatting: workbenchChatting,
    agent: z
      .object({
        agent_id: z.string(),
        nickname: z.string(),
        avatar: z.string(),
        level: z.string().openapi({ description: 'agent, admin or ticket_agent.' }),
        state: z.string().openapi({ description: 'online, offline, busy or away.' }),
      })
      .strict(),
    agent_groups: z.array(z.object({ id: z.string(), name: z.string(), is_default: z.boolean() }).strict()),
    setting: z
      .object({ bid: z.string(), appname: z.string(), appkey: z.string(), ws_address: z.string() })
      .catchall(z.unknown())
      .openapi({ description: 'bid, appkey and ws_address, plus free-form merchant settings.' }),
    visitor_attribute_config: z
      .object({
        attributes: z.array(
          z.object({ key: z.string(), label: z.string(), type: z.string(), editable: z.boolean() }).strict(),
        ),
      })
      .strict(),
    extensions: z
      .object({
        nav: z.array(z.unknown()),
        chat_actions: z.array(z.unknown()),
        side_iframes: z.array(z.unknown()),
        flags: z.record(z.string(), z.unknown()),
        account_level_options: z.record(z.string(), z.unknown()),
      })
      .strict(),
  })
  .strict();

/** The workbench in the legacy snake_case shape of the spec. */
function legacyWorkbench(w: Workbench): z.input<typeof workbenchData> {
  return {
    chatting: Object.fromEntries(
      w.chatting.map((c) => [
        c.key,
        {
          id: c.id,
          name: c.name,
          type: c.type,
          timestamp: c.timestamp,
          pinned_at: c.pinnedAt,
          unread_count: c.unreadCount,
          bot: c.bot,
          account_state: c.accountState,
          history_only_mine: c.historyOnlyMine,
          items: c.items,
        },
      ]),
    ),
    agent: {
      agent_id: w.agent.agentId,
      nickname: w.agent.nickname,
      avatar: w.agent.avatar,
      level: w.agent.level,
      state: w.agent.state,
    },
    agent_groups: w.agentGroups.map((g) => ({ id: g.id, name: g.name, is_default: g.isDefault })),
    // The merchant's free-form settings first, so they can never override the fixed members.
    setting: {
      ...w.setting.extra,
      bid: w.setting.bid,
      appname: w.setting.appname,
      appkey: w.setting.appkey,
      ws_address: w.setting.wsAddress,
    },
    visitor_attribute_config: {
      attributes: w.visitorAttributeConfig.attributes.map((a) => ({
        key: a.key,
        label: a.label,
        type: a.type,
        editable: a.editable,
      })),
    },
    extensions: {
      nav: w.extensions.nav,
      chat_actions: w.extensions.chat_actions,
      side_iframes: w.extensions.side_iframes,
      flags: w.extensions.flags,
      account_level_options: w.extensions.account_level_options,
    },
  };
}

export const agentEndpoints: AnyRoute[] = [
  captcha('login', '/agent/login/logincaptcha', 'Login graphic captcha'),
  captcha('join', '/agent/login/joincaptcha', 'Registration graphic captcha'),
  jsonRoute({
    method: 'post',
    path: '/agent/login/check',
    identity: 'session',
    tag: 'Agent login',
    summary: 'Agent login',
    description:
      'Checks username, password and the login captcha of the same Session; on success regenerates the Session and returns its ID. Failures: wrong captcha 1001, wrong credentials or locked 1002, disabled 1003.',
    input: loginInput,
    requestExample: { username: 'alice', password: 'alice-password', captcha: 'x7kq' },
    output: z
      .object({
        token: z
          .string()
          .openapi({ description: 'The agent Session ID: reusable as the `token` header or query parameter.' }),
        redirect: z.string().openapi({ description: 'Where to go after login: a path under `/agent/`.' }),
      })
      .strict(),
    example: { token: 'kq3Jm1x0b8bq7TcMZ3RgfQAd9s0LwZ7e', redirect: '/agent/' },
    handle: ({ deps, req, input }) => login(deps, requestSessionPort(req), input, clientIp(req, deps.config)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/login/smscaptcha',
    identity: 'session',
    tag: 'Agent login',
    summary: 'Send a registration SMS code',
    description:
      'Needs the registration graphic captcha of the same Session; only when SMS registration is on (else 1005). The 6-digit code is valid 5 minutes. Rate-limited per Session, number and IP (429 with a message to show). Spec: success is code 0, msg "", data [].',
    input: smsCaptchaInput,
    requestExample: { mobile: '13800138000', captcha: 'x7kq' },
    output: z.array(z.unknown()).max(0),
    msg: '',
    errors: { 502: 'The SMS could not be sent (1007).' },
    async handle({ deps, req, input }) {
      await sendSmsCaptcha(deps, requestSessionPort(req), input, clientIp(req, deps.config));
      return [];
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/login/smsverify',
    identity: 'session',
    tag: 'Agent login',
    summary: 'Verify a registration SMS code',
    input: smsVerifyInput,
    requestExample: { mobile: '13800138000', code: '123456' },
    output: z.object({ mobile: z.string(), verified: z.literal(true) }).strict(),
    async handle({ deps, req, input }) {
      await verifySmsCode(deps, requestSessionPort(req), input);
      return { mobile: input.mobile, verified: true as const };
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/logout',
    identity: 'session',
    tag: 'Agent login',
    summary: 'Log out',
    description: 'Destroys the current Session (the agent’s other Sessions stay).',
    output: z.array(z.unknown()).max(0),
    async handle({ deps, req, res }) {
      await logout(deps, requestSessionPort(req));
      res.clearCookie(SESSION_COOKIE, { path: '/' });
      return [];
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/data/get',
    identity: 'agent',
    tag: 'Agent',
    summary: 'Agent workbench bootstrap',
    description:
      'Everything the workbench needs first, scoped to the agent’s merchant. Not logged in: HTTP 200 with code -1. Ticket agents: HTTP 403.',
    output: workbenchData,
    handle: async ({ deps, req, viewer }) =>
      legacyWorkbench(await loadWorkbench(deps, viewer, { wsAddress: wsAddressFor(req, deps.config) })),
  }),
];
