import type { z } from 'zod';

/**
 * Which channel carries an event: `global-{bid}`, `agent-{agent_id}`, the visitor's own, or
 * `admin-{bid}` (the merchant's admins: every `message.created` of the merchant); or
 * `internal`, the instances' own channel (`internal:config`) that no client identity may subscribe to;
 * `webhook`: only to the merchant's webhook endpoints (docs/integration.md).
 */
export type Audience = 'global' | 'agent' | 'visitor' | 'admin' | 'internal' | 'webhook';

export interface EventDeclaration<Domain, Wire> {
  audiences: readonly Audience[];
  description: string;
  /** The payload subscribers receive. */
  payload: z.ZodType<Wire>;
  /** The one mapping from the domain's shape to the wire shape. */
  toWire: (data: Domain) => Wire;
  /** `gateway`: published by the domain; `bus`: produced by the channel itself. */
  origin?: 'gateway' | 'bus';
  /** Delivered to webhook endpoints that ask for it, with this payload version (docs/integration.md). */
  webhook?: number;
}

export const declare = <Domain, Wire>(d: EventDeclaration<Domain, Wire>) => d;
/** The mapping of an event whose wire payload is its domain data. */
export const same = <T>(data: T) => data;
