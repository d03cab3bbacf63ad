import type { GraphQLContext } from './builder.js';

/**
 * What the GraphQL fields share: GraphQL arguments as the domain's typed input (`defined`), and
 * the chat's caller (`chatViewer`). Chat fields that both sides use act for whoever calls: a request with a visitor bearer token is the visitor (its own
 * conversation), otherwise the agent of the Session, who names the visitor.
 */

export const chatViewer = (ctx: GraphQLContext) => (ctx.identity === 'visitor' ? ctx.visitor() : ctx.agent());

/**
 * The caller of a read a merchant's server may also make (`conversation`, `conversations`,
 * `messages`): its API key (the domain checks `conversations:read`), else as `chatViewer`.
 */
export const readerViewer = (ctx: GraphQLContext) => (ctx.identity === 'apiKey' ? ctx.apiKey() : chatViewer(ctx));

/** The caller of a merchant operation a server may also make (webhooks): its API key, else the agent. */
export const managerViewer = (ctx: GraphQLContext) => (ctx.identity === 'apiKey' ? ctx.apiKey() : ctx.agent());

/** GraphQL gives absent optional arguments as null; the domain's inputs want them absent. */
export const defined = <T extends Record<string, unknown>>(args: T) =>
  Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null && v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], null>;
  };
