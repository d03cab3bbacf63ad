import SchemaBuilder from '@pothos/core';
import type { Deps } from '../deps.js';
import type { ChannelViewer } from '../resolvers/channels.js';
import type { ApiKeyViewer } from '../resolvers/integration/api-keys/authenticate.js';
import type { SessionDirectory, SessionPort } from '../resolvers/session.js';
import type { AgentViewer, VisitorViewer } from '../resolvers/viewer.js';
import type { ChannelEvent } from '../stores/bus.js';

/** Per-operation context, built the same way for HTTP requests and WebSocket subscriptions. */
export interface GraphQLContext {
  deps: Deps;
  /** The agent of the login Session (cookie, `token` header/query, or socket init `token`). */
  agent(): Promise<AgentViewer>;
  /** The visitor of the `Authorization: Bearer` token (header or socket init `authorization`). */
  visitor(): Promise<VisitorViewer>;
  /**
   * The API key of `Authorization: Bearer prly_…` (HTTP only: sockets take no key), checked once
   * per operation; API_KEY_INVALID otherwise.
   */
  apiKey(): Promise<ApiKeyViewer>;
  /** The HTTP request's visitor bearer token, for revoking it; absent on sockets. */
  visitorToken?: string;
  /** The HTTP request's Session, for login and logout; absent on sockets. */
  session?: SessionPort;
  /**
   * The identity this request or socket presents: `apiKey` when it carries a `prly_` Bearer key,
   * `visitor` when it carries another Bearer token, else `agent`.
   */
  identity: 'agent' | 'visitor' | 'apiKey';
  wsAddress: string;
  clientIp: string;
  /** The stored agent Sessions (the Session list, ending a Session); HTTP only, absent on sockets. */
  sessionDirectory?: () => SessionDirectory;
  /**
   * Sockets only: starts delivering an authorized channel to this operation (src/subscriptions/
   * fanout.ts writes its frames); the stream yields nothing and ends with the subscription.
   */
  openChannel?: (viewer: ChannelViewer, name: string, since: string | undefined) => AsyncIterable<ChannelEvent>;
}

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  DefaultFieldNullability: false;
  Scalars: {
    JSON: { Input: unknown; Output: unknown };
    AttributeValue: { Input: string | number | boolean; Output: string | number | boolean };
    Weekday: { Input: string | number; Output: number };
  };
}>({ defaultFieldNullability: false });

builder.queryType({ description: 'Reads: the two bootstraps and the current agent.' });
builder.mutationType({ description: 'Writes: agent login/logout and visitor tokens.' });
builder.subscriptionType({ description: 'Real-time channels.' });

builder.scalarType('JSON', {
  description: 'Arbitrary JSON, used only where the spec leaves the shape open ("not shown").',
  serialize: (value) => value,
  parseValue: (value) => value,
});
