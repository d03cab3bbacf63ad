import { z } from 'zod';
import { declare, same } from './declaration.js';

/** Events no subject publishes: the instances' own (`internal`) and those a channel itself produces (`bus`). */
export const channelEvents = {
  'merchant.config_changed': declare({
    audiences: ['internal'],
    description:
      "A merchant's configuration (settings, switches, upload limits, groups, attribute definitions, extensions) changed: every instance drops its cached copy.",
    payload: z.object({ merchant_id: z.string() }).strict(),
    toWire: (d: { merchantId: string }) => ({ merchant_id: d.merchantId }),
  }),
  'visitor_token.revoked': declare({
    audiences: ['internal'],
    description: 'A visitor token was revoked: every instance forgets its cached check of it (SHA-256 of the token).',
    payload: z.object({ token_hash: z.string() }).strict(),
    toWire: (d: { tokenHash: string }) => ({ token_hash: d.tokenHash }),
  }),
  subscribed: declare({
    audiences: ['global', 'agent', 'visitor', 'admin'],
    origin: 'bus',
    description:
      'First event of a subscription without `since`: its position is where to resume from. Carries no data; not a published event.',
    payload: z.object({}).strict(),
    toWire: same<Record<string, never>>,
  }),
  'history.gap': declare({
    audiences: ['global', 'agent', 'visitor', 'admin'],
    origin: 'bus',
    description: 'Events after `since` were already dropped from the channel history: reload your state.',
    payload: z.object({ since: z.string() }).strict(),
    toWire: same<{ since: string }>,
  }),
} as const;
