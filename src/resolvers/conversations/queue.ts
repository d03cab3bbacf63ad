import { and, asc, count, desc, eq, inArray, isNull, ne, or, sql } from 'drizzle-orm';
import { type Agent, agentGroups, agents, conversations, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { groupOpenAt } from '../availability/calendars.js';
import { chooseAgent, type RoutingPolicy } from '../availability/routing/policies.js';
import { type ConversationContext, selectContexts } from '../chat-rows.js';
import { enqueueRows, outboxRow, rowsOf, type Tx, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { TICKET_AGENT } from '../viewer.js';
import { assignMany } from './assignment.js';

/**
 * The queue and its drain (docs/availability.md "Routing"). Queued conversations are served
 * whenever capacity may have appeared (a new conversation, a close, a transfer, an agent coming
 * online) and periodically. **One drain per merchant at a time**, cluster-wide: a drain holds a
 * transaction-scoped advisory lock on its merchant (`pg_try_advisory_xact_lock`). A drain asked
 * for while another holds the lock is not lost: the asker first sets the merchant's "drain
 * again" flag in the shared store, and the holder, after it commits, takes the flag and drains
 * once more (it clears the flag under the lock before it reads the queue, so whatever was
 * committed before the flag was set is either read by that pass or by the next). On one
 * instance, concurrent asks join the single drain that starts after them.
 */

/** What a drain may be asked to honour: the agent a visitor asked for, for its new conversation. */
export interface PreferredAgent {
  conversationId: string;
  agentId: string;
}

/** Queued conversations read per group and pass (a group's free capacity is far below it). */
const PASS_LIMIT = 500;
/** Passes one drain call makes at most (each one asked again meanwhile); the periodic drain does the rest. */
const MAX_PASSES = 50;
/** The "drain again" flag of a merchant in the shared store; it outlives no pass by much. */
const redoKey = (merchantId: string) => `routing:drain-again:${merchantId}`;
const REDO_TTL_SECONDS = 60;

/** An agent's capacity: its own maximum, else the merchant's. */
const capacityOf = (agent: Agent, merchantMax: number) => agent.maxConcurrentChats ?? merchantMax;

/** Agents of the merchant that routing may give conversations to now: online (presence), enabled, reception. */
async function routableAgents(deps: Deps, merchantId: string): Promise<string[]> {
  const candidates = await deps.db
    .select({ id: agents.id })
    .from(agents)
    .where(and(eq(agents.merchantId, merchantId), eq(agents.disabled, false), ne(agents.level, TICKET_AGENT)));
  const states = await Promise.all(candidates.map((a) => deps.presence.stateOf(a.id)));
  return candidates.filter((_, i) => states[i] === 'online').map((a) => a.id);
}

/** What routing decides from, loaded inside its transaction with the candidate agents' rows locked. */
interface Routing {
  locked: Agent[];
  merchant: { max: number; bid: string };
  defaultGroupId: string | null;
  /** Active conversations per locked agent. */
  active: Map<string, number>;
  /** Each group's policy and round-robin cursor (read after the agents' rows are locked). */
  groups: Map<string, { policy: RoutingPolicy; cursor: string | null }>;
}

async function loadRouting(tx: Tx, merchantId: string, online: string[]): Promise<Routing | undefined> {
  // Claims and transfers lock an agent's row too: the count below stays true until the commit.
  const locked = await tx
    .select()
    .from(agents)
    .where(and(inArray(agents.id, online), eq(agents.merchantId, merchantId), eq(agents.disabled, false)))
    .orderBy(asc(agents.id))
    .for('update');
  const [merchant] = await tx
    .select({ max: merchants.maxConcurrentChats, bid: merchants.bid })
    .from(merchants)
    .where(eq(merchants.id, merchantId));
  if (!merchant || locked.length === 0) return undefined;
  const active = new Map<string, number>();
  for (const { agentId, n } of await tx
    .select({ agentId: conversations.agentId, n: count() })
    .from(conversations)
    .where(
      and(
        eq(conversations.state, 'active'),
        inArray(
          conversations.agentId,
          locked.map((a) => a.id),
        ),
      ),
    )
    .groupBy(conversations.agentId))
    if (agentId) active.set(agentId, Number(n));
  const rows = await tx
    .select({
      id: agentGroups.id,
      isDefault: agentGroups.isDefault,
      policy: agentGroups.routing,
      cursor: agentGroups.routingCursor,
    })
    .from(agentGroups)
    .where(eq(agentGroups.merchantId, merchantId));
  const groups = new Map(rows.map((g) => [g.id, { policy: g.policy as RoutingPolicy, cursor: g.cursor }]));
  return { locked, merchant, defaultGroupId: rows.find((g) => g.isDefault)?.id ?? null, active, groups };
}

/** Under SKILLS: an agent may take a conversation when it holds every skill the conversation requires. */
const hasSkills = (a: Agent, required: readonly string[]) => required.every((skill) => a.skills.includes(skill));

/** The group an agent serves: its own, else the default group. */
const groupOf = (r: Routing, a: Agent) => a.groupId ?? r.defaultGroupId;
const hasRoom = (r: Routing, a: Agent) => (r.active.get(a.id) ?? 0) < capacityOf(a, r.merchant.max);

/**
 * The agent a queued conversation goes to: the preferred one if eligible, else by its group's
 * policy (least busy, round robin, last agent) among the group's online agents under capacity.
 */
async function pickAgent(
  tx: Tx,
  r: Routing,
  group: string | null,
  ctx: ConversationContext,
  preferred: PreferredAgent | undefined,
): Promise<Agent | undefined> {
  const policy = (group && r.groups.get(group)) || { policy: 'LEAST_BUSY' as const, cursor: null };
  const eligible = r.locked.filter(
    (a) =>
      groupOf(r, a) === group &&
      hasRoom(r, a) &&
      (policy.policy !== 'SKILLS' || hasSkills(a, ctx.conversation.requiredSkills)),
  );
  if (eligible.length === 0) return undefined;
  const wanted =
    preferred && preferred.conversationId === ctx.conversation.id
      ? eligible.find((a) => a.id === preferred.agentId)
      : undefined;
  if (wanted) return wanted;
  const lastAgentId = policy.policy === 'LAST_AGENT' ? await previousAgentOf(tx, ctx) : null;
  return chooseAgent(eligible, { ...policy, active: r.active, lastAgentId });
}

/** The agent of the visitor's latest earlier conversation (for the last-agent policy). */
async function previousAgentOf(tx: Tx, ctx: ConversationContext): Promise<string | null> {
  const [row] = await tx
    .select({ agentId: conversations.agentId })
    .from(conversations)
    .where(
      and(
        eq(conversations.merchantId, ctx.conversation.merchantId),
        eq(conversations.visitorId, ctx.conversation.visitorId),
        ne(conversations.id, ctx.conversation.id),
        sql`${conversations.agentId} is not null`,
      ),
    )
    .orderBy(desc(conversations.createdAt))
    .limit(1);
  return row?.agentId ?? null;
}

/** The queued conversations of a group, in queue order: higher priority first, oldest first within one. */
function queueOf(tx: Tx, merchantId: string, group: string | null, isDefault: boolean) {
  return selectContexts(tx)
    .where(
      and(
        eq(conversations.merchantId, merchantId),
        eq(conversations.state, 'queued'),
        group === null
          ? isNull(conversations.groupId)
          : isDefault
            ? or(eq(conversations.groupId, group), isNull(conversations.groupId))
            : eq(conversations.groupId, group),
      ),
    )
    .orderBy(desc(conversations.priority), asc(conversations.queuedAt), asc(conversations.id))
    .limit(PASS_LIMIT);
}

/**
 * One pass under the merchant's lock: each group that is open and has an online agent with room
 * serves its queue oldest first by its policy. Assignment is a compare-and-set on the
 * conversation (a close or a claim meanwhile wins). Returns how many it assigned.
 */
async function drainPass(
  deps: Deps,
  tx: Tx,
  merchantId: string,
  online: string[],
  preferred: PreferredAgent | undefined,
): Promise<string[]> {
  const routing = await loadRouting(tx, merchantId, online);
  if (!routing) return [];
  const now = deps.now();
  // Decide every assignment of the pass first (in memory, on the counts read under the locks),
  // then write them all in a few statements.
  const decided: { ctx: ConversationContext; agent: Agent }[] = [];
  const cursors = new Map<string, string>();
  // A merchant without a default group: its agents without a group serve the conversations without one.
  const served = routing.defaultGroupId ? [...routing.groups.keys()] : [...routing.groups.keys(), null];
  for (const group of served) {
    const hasRoomIn = () => routing.locked.some((a) => groupOf(routing, a) === group && hasRoom(routing, a));
    if (!hasRoomIn()) continue;
    // Out of business hours a group's conversations wait (messages left) until it opens.
    if (!(await groupOpenAt(tx, merchantId, group, now))) continue;
    for (const ctx of await queueOf(tx, merchantId, group, group === routing.defaultGroupId)) {
      const agent = await pickAgent(tx, routing, group, ctx, preferred);
      if (!agent) {
        if (!hasRoomIn()) break;
        continue;
      }
      decided.push({ ctx, agent });
      routing.active.set(agent.id, (routing.active.get(agent.id) ?? 0) + 1);
      agent.lastAssignedAt = new Date(now);
      const policy = group ? routing.groups.get(group) : undefined;
      if (group && policy?.policy === 'ROUND_ROBIN') {
        policy.cursor = agent.id;
        cursors.set(group, agent.id);
      }
    }
  }
  // A compare-and-set that fails (closed or claimed meanwhile) leaves a seat free for the next drain.
  const done = await assignMany(tx, decided, now);
  // The round-robin cursor lives in the group's row: the next drain, on any instance, continues from it.
  for (const [group, cursor] of cursors)
    await tx.update(agentGroups).set({ routingCursor: cursor }).where(eq(agentGroups.id, group));
  // The order keys of the assigned conversations: their events are published after the commit.
  return done.map((ctx) => visitorKey(ctx.conversation.visitorId));
}

/**
 * Tells each waiting visitor of the merchant whose queue position moved since it was last told
 * (`conversation.queue_position` on its channel, through the outbox): conversations ahead of it
 * were served, closed or claimed, or went ahead of it (a re-queue, a higher priority). Runs in a
 * drain's transaction, under the merchant's lock, so positions are told in the order they were
 * computed on every instance; the position told is kept on the row (`queue_position_told`), so a
 * visitor hears of each new position once. Only conversations already told they wait
 * (`conversation.queued`) are told again: a new one about to be routed hears nothing. A row
 * locked by another writer meanwhile (a message being sent) is left for the next drain. Returns
 * the order keys to publish.
 */
async function tellQueuePositions(tx: Tx, merchantId: string): Promise<string[]> {
  const moved = rowsOf<{ id: string; visitor_id: string; group_id: string | null; n: number; channel: string }>(
    await tx.execute(sql`
      with ranked as (
        select id, queue_position_told as told,
          (row_number() over (partition by group_id order by priority desc, queued_at, id))::int as n
        from conversations where merchant_id = ${merchantId} and state = 'queued'
      ), moved as (
        select c.id from conversations c where c.id in (
          select id from ranked where told is not null and told <> n
        ) order by c.id for update skip locked
      )
      update conversations c set queue_position_told = r.n
      from ranked r, moved m, visitors v
      where c.id = r.id and c.id = m.id and v.id = c.visitor_id and c.state = 'queued'
      returning c.id, c.visitor_id, c.group_id, r.n, v.channel`),
  ).sort((a, b) => (a.id < b.id ? -1 : 1));
  await enqueueRows(
    tx,
    moved.map((m) =>
      outboxRow(visitorKey(m.visitor_id), m.channel, 'conversation.queue_position', {
        conversationId: m.id,
        visitorId: m.visitor_id,
        state: 'queued',
        groupId: m.group_id,
        queuePosition: Number(m.n),
      }),
    ),
  );
  return moved.map((m) => visitorKey(m.visitor_id));
}

/** Takes the merchant's drain lock for the transaction; `wait` blocks for it, else a busy lock answers false. */
async function lockMerchant(tx: Tx, merchantId: string, wait: boolean): Promise<boolean> {
  const key = sql`hashtextextended(${`parley:drain:${merchantId}`}, 0)`;
  if (wait) {
    await tx.execute(sql`select pg_advisory_xact_lock(${key})`);
    return true;
  }
  const [row] = rowsOf<{ ok: boolean }>(await tx.execute(sql`select pg_try_advisory_xact_lock(${key}) as ok`));
  return Boolean(row?.ok);
}

/**
 * Drains until nobody asked again: each pass runs under the merchant's lock (a busy lock leaves
 * the work to its holder, which finds the flag). A preferred agent waits for the lock instead,
 * so the visitor's request is honoured by this call.
 */
async function drainUntilQuiet(deps: Deps, merchantId: string, preferred?: PreferredAgent): Promise<number> {
  await deps.kv.set(redoKey(merchantId), '1', REDO_TTL_SECONDS);
  let total = 0;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    // With nobody online a pass assigns nothing but still tells the waiting visitors their positions.
    const online = await routableAgents(deps, merchantId);
    const result = await deps.db.transaction(async (tx) => {
      if (!(await lockMerchant(tx, merchantId, preferred !== undefined))) return null;
      await deps.kv.del(redoKey(merchantId));
      const assigned = online.length > 0 ? await drainPass(deps, tx, merchantId, online, preferred) : [];
      return { assigned, told: await tellQueuePositions(tx, merchantId) };
    });
    if (result === null) return total;
    preferred = undefined;
    const keys = [...new Set([...result.assigned, ...result.told])];
    if (keys.length > 0) await publishOutbox(deps, keys);
    total += result.assigned.length;
    if ((await deps.kv.take(redoKey(merchantId))) === null) return total;
  }
  return total;
}

/** Per instance and merchant: the drain running, and the one queued after it that later asks join. */
const drains = new WeakMap<Deps, Map<string, { running?: Promise<number>; next?: Promise<number> }>>();

/**
 * Serves the merchant's queue (see the file's comment). Returns how many this call's drain
 * assigned (0 when another instance's drain holds the lock and will serve it).
 */
export function drainQueue(deps: Deps, merchantId: string, preferred?: PreferredAgent): Promise<number> {
  if (preferred) return drainUntilQuiet(deps, merchantId, preferred);
  const byMerchant = drains.get(deps) ?? new Map<string, { running?: Promise<number>; next?: Promise<number> }>();
  drains.set(deps, byMerchant);
  const state = byMerchant.get(merchantId) ?? {};
  byMerchant.set(merchantId, state);
  const start = () => {
    const run = drainUntilQuiet(deps, merchantId).finally(() => {
      if (state.running === run) state.running = undefined;
      if (!state.running && !state.next) byMerchant.delete(merchantId);
    });
    state.running = run;
    return run;
  };
  if (!state.running) return start();
  state.next ??= state.running
    .catch(() => 0)
    .then(() => {
      state.next = undefined;
      return start();
    });
  return state.next;
}

/** Drains the queue of a merchant named by bid (presence changes know the bid); never throws. */
export async function drainQueueQuietly(deps: Deps, merchant: { bid: string } | { merchantId: string }) {
  try {
    let merchantId: string | undefined;
    if ('merchantId' in merchant) merchantId = merchant.merchantId;
    else {
      const [row] = await deps.db.select({ id: merchants.id }).from(merchants).where(eq(merchants.bid, merchant.bid));
      merchantId = row?.id;
    }
    if (merchantId) await drainQueue(deps, merchantId);
  } catch (error) {
    deps.log.warn({ err: (error as Error).message }, 'chat: queue drain failed, the periodic drain retries');
  }
}

/** The periodic safety net: drains the queue of every merchant that has queued conversations. */
export async function drainAllQueues(deps: Deps): Promise<number> {
  const rows = await deps.db
    .selectDistinct({ merchantId: conversations.merchantId })
    .from(conversations)
    .where(eq(conversations.state, 'queued'));
  let n = 0;
  for (const { merchantId } of rows) n += await drainQueue(deps, merchantId);
  return n;
}
