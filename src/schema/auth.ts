import { badInput } from '../errors.js';
import { registerMerchant } from '../resolvers/desk/registration.js';
import { loginInput, parseInput } from '../resolvers/inputs.js';
import { login, logout } from '../resolvers/login.js';
import { loadAgentProfile } from '../resolvers/workbench.js';
import type { GraphQLContext } from './builder.js';
import { builder } from './builder.js';
import { withoutNulls } from './desk/admin.js';
import { AgentRef } from './workbench.js';

/**
 * Login and logout change the HTTP Session (cookie): they cannot run over a socket, nor in an
 * HTTP request that identifies a visitor by its bearer token.
 */
function httpSession(ctx: GraphQLContext) {
  if (ctx.visitorToken) {
    throw badInput('login and logout are agent operations: send them without a visitor Authorization header');
  }
  if (!ctx.session) throw badInput('login and logout are HTTP-only operations: send them as POST /graphql');
  return ctx.session;
}

const LoginResult = builder.objectRef<{ token: string; redirect: string }>('LoginResult').implement({
  description: 'A successful agent login; the Session cookie is set as well.',
  fields: (t) => ({
    token: t.exposeString('token', { description: 'The Session ID; usable as the `token` header or query parameter.' }),
    redirect: t.exposeString('redirect', { description: 'Where to go next (a path under /agent/).' }),
  }),
});

builder.mutationField('login', (t) =>
  t.field({
    type: LoginResult,
    description:
      'Agent login with username, password and the login captcha of the same Session (GET /agent/login/logincaptcha).',
    args: {
      username: t.arg.string({ required: true, description: 'Agent user name (matched case-insensitively).' }),
      password: t.arg.string({ required: true, description: 'Password.' }),
      captcha: t.arg.string({
        required: true,
        description: 'Answer of the login graphic captcha fetched in the same Session.',
      }),
      cid: t.arg.string({ description: 'Optional push identifier.' }),
    },
    resolve: (_root, args, ctx) =>
      login(ctx.deps, httpSession(ctx), parseInput(loginInput, { ...args, cid: args.cid ?? undefined }), ctx.clientIp),
  }),
);

builder.mutationField('logout', (t) =>
  t.boolean({
    description: 'Ends the current agent Session.',
    resolve: async (_root, _args, ctx) => {
      await logout(ctx.deps, httpSession(ctx));
      return true;
    },
  }),
);

builder.queryField('currentAgent', (t) =>
  t.field({
    type: AgentRef,
    description: 'The agent of the current Session (any role).',
    resolve: async (_root, _args, ctx) => loadAgentProfile(ctx.deps, (await ctx.agent()).agent),
  }),
);

const RegistrationResult = builder
  .objectRef<{ token: string; redirect: string; bid: string; appkey: string }>('RegistrationResult')
  .implement({
    description: 'A registered merchant; its first agent (level admin) is logged in (the Session cookie is set).',
    fields: (t) => ({
      token: t.exposeString('token', { description: 'The new admin’s Session ID.' }),
      redirect: t.exposeString('redirect', { description: 'Where to go next: the admin page.' }),
      bid: t.exposeString('bid', { description: 'The merchant’s business id.' }),
      appkey: t.exposeString('appkey', { description: 'The merchant’s public application key (visitor widget).' }),
    }),
  });

const RegisterMerchantInput = builder.inputType('RegisterMerchantInput', {
  description:
    'A merchant registration (REGISTRATION=on). SMS registration off: `captcha` (the join captcha of this Session); on: `mobile` and `code` (the SMS code sent to it).',
  fields: (t) => ({
    merchantName: t.string({ required: true, description: 'The merchant’s display name.' }),
    username: t.string({ required: true, description: 'The first agent’s login name.' }),
    nickname: t.string({ required: true, description: 'The first agent’s display name.' }),
    password: t.string({ required: true, description: 'The first agent’s password (at least 8 characters).' }),
    mobile: t.string({ description: 'SMS registration on: the verified mobile number (one merchant per number).' }),
    code: t.string({ description: 'SMS registration on: its SMS code (unless already verified in this Session).' }),
    captcha: t.string({ description: 'SMS registration off: the answer of GET /agent/login/joincaptcha.' }),
    bid: t.string({ description: 'A wanted business id (generated when absent).' }),
    appkey: t.string({ description: 'A wanted appkey (generated when absent).' }),
  }),
});

builder.mutationField('registerMerchant', (t) =>
  t.field({
    type: RegistrationResult,
    description:
      'Registers a merchant with its first agent (level admin) in one transaction and logs that agent in. Refused when registration is off (REGISTRATION_DISABLED) or the mobile number already registered a merchant (MOBILE_ALREADY_REGISTERED).',
    args: { input: t.arg({ type: RegisterMerchantInput, required: true, description: 'What to create or change.' }) },
    resolve: (_root, { input }, ctx) => registerMerchant(ctx.deps, httpSession(ctx), withoutNulls(input), ctx.clientIp),
  }),
);
