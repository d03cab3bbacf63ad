import { and, eq } from 'drizzle-orm';
import type { z } from 'zod';
import { agents, merchants, visitors } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { publishEvent } from '../../channels.js';
import { globalChannel } from '../../events.js';
import { parseInput, publishEventInput } from '../../inputs.js';
import type { ApiKeyViewer } from './authenticate.js';
import { requireScope } from './scopes.js';

export type PublishMerchantEventInput = z.input<typeof publishEventInput>;

const AGENT_PREFIX = 'agent-';

/** Whether `channel` is one of the merchant's: its `global-{bid}`, an agent's `agent-{id}`, a visitor's channel. */
async function isMerchantChannel(deps: Deps, merchantId: string, channel: string): Promise<boolean> {
  if (channel.startsWith(AGENT_PREFIX)) {
    const [agent] = await deps.db
      .select({ id: agents.id })
      .from(agents)
      .where(and(eq(agents.id, channel.slice(AGENT_PREFIX.length)), eq(agents.merchantId, merchantId)))
      .limit(1);
    if (agent) return true;
  }
  const [merchant] = await deps.db
    .select({ bid: merchants.bid })
    .from(merchants)
    .where(eq(merchants.id, merchantId))
    .limit(1);
  if (merchant && channel === globalChannel(merchant.bid)) return true;
  const [visitor] = await deps.db
    .select({ id: visitors.id })
    .from(visitors)
    .where(and(eq(visitors.channel, channel), eq(visitors.merchantId, merchantId)))
    .limit(1);
  return Boolean(visitor);
}

/**
 * `POST /internal/events` for one merchant: a key with `events:publish` publishes `data` as
 * `event` on a channel of its own merchant only (another merchant's channel, or one that does
 * not exist, is FORBIDDEN alike); the gateway's own event names stay reserved.
 */
export async function publishMerchantEvent(
  deps: Deps,
  viewer: ApiKeyViewer,
  raw: PublishMerchantEventInput,
): Promise<{ id: string }> {
  requireScope(viewer, 'events:publish');
  const input = parseInput(publishEventInput, raw);
  if (!(await isMerchantChannel(deps, viewer.merchantId, input.channel)))
    throw new DomainError('FORBIDDEN', 'channel is not one of this merchant’s channels');
  return { id: (await publishEvent(deps, input)).id };
}
