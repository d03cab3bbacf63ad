import { badInput } from '../errors.js';
import { loginInput, parseInput } from '../resolvers/inputs.js';
import { login, logout } from '../resolvers/login.js';
import { loadAgentProfile } from '../resolvers/workbench.js';
import type { GraphQLContext } from './builder.js';
import { builder } from './builder.js';
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
