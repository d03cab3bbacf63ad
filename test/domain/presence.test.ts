import { eq } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import { agents } from '../../src/db/schema.js';
import { globalChannel } from '../../src/resolvers/events.js';
import {
  CONNECTION_TTL_MS,
  createPresenceTracker,
  HEARTBEAT_MS,
  readAgentState,
  setAgentState,
  settleExpiredPresence,
} from '../../src/resolvers/presence.js';
import type { AgentViewer } from '../../src/resolvers/viewer.js';
import {
  codeOf,
  eventually,
  type Factories,
  recordEvents,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../support/deps.js';

/**
 * docs/realtime.md "Presence (`agent.state`)": offline unless connected; busy or away when chosen; each
 * change published once on `global-{bid}` with its reason.
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made), { ownPresence: true });

/** An agent and a recorder of its merchant's `agent.state` events as [state, reason]. */
async function watched(opts: { level?: 'agent' | 'ticket_agent' } = {}) {
  const merchant: TestMerchant = await make.merchant();
  const agent = await make.agent(merchant, opts);
  const recorder = recordEvents(deps, [globalChannel(merchant.bid)]);
  await recorder.ready;
  const states = () =>
    recorder.of('agent.state').map((e) => {
      const d = e.data as { agent_id: string; state: string; reason: string };
      expect(d.agent_id).toBe(agent.agentId);
      return [d.state, d.reason];
    });
  /** Everything published so far has arrived (a marker published after it has). */
  const settled = async () => {
    const marker = `test.marker.${recorder.events.length}`;
    await deps.bus.publish(globalChannel(merchant.bid), marker, {});
    await eventually(() => recorder.of(marker).length === 1, 'the marker');
  };
  return { merchant, agent, recorder, states, settled };
}

const manualState = async (agent: AgentViewer) =>
  (await deps.db.select().from(agents).where(eq(agents.id, agent.agentId)))[0]?.manualState;

describe('agent state', () => {
  it('connected: online; busy and away when chosen; online again when cleared — each change once, reason manual', async () => {
    const w = await watched();
    expect(await readAgentState(deps, w.agent.agent)).toBe('offline');
    await make.online(w.agent);
    expect(await readAgentState(deps, w.agent.agent)).toBe('online');
    expect((await setAgentState(deps, w.agent, 'busy')).manualState).toBe('busy');
    expect(await readAgentState(deps, w.agent.agent)).toBe('busy');
    await setAgentState(deps, w.agent, 'busy'); // no change, no event
    await setAgentState(deps, w.agent, 'away');
    expect(await manualState(w.agent)).toBe('away');
    expect((await setAgentState(deps, w.agent, 'online')).manualState).toBeNull();
    await setAgentState(deps, w.agent, 'busy');
    await setAgentState(deps, w.agent, null);
    expect(await manualState(w.agent)).toBeNull();
    await w.settled();
    expect(w.states()).toEqual([
      ['online', 'connected'],
      ['busy', 'manual'],
      ['away', 'manual'],
      ['online', 'manual'],
      ['busy', 'manual'],
      ['online', 'manual'],
    ]);
    w.recorder.stop();
  });

  it('a state chosen while offline is kept for the next connection, and publishes nothing now', async () => {
    const w = await watched();
    await setAgentState(deps, w.agent, 'away');
    expect(await readAgentState(deps, w.agent.agent)).toBe('offline');
    await w.settled();
    expect(w.states()).toEqual([]);
    await make.online(await make.agentViewer(w.agent.agentId));
    await w.settled();
    expect(w.states()).toEqual([['away', 'connected']]);
    w.recorder.stop();
  });

  it('offline cannot be chosen, nor any state but busy, away and online — each refusal says which', async () => {
    const w = await watched();
    expect(await refusalOf(setAgentState(deps, w.agent, 'offline'))).toBe(
      'BAD_USER_INPUT: state offline cannot be chosen: it follows from having no connection',
    );
    for (const state of ['sleeping', 'BUSY', '']) {
      expect(await refusalOf(setAgentState(deps, w.agent, state)), state).toBe(
        'BAD_USER_INPUT: state must be busy, away or online',
      );
    }
    expect(await manualState(w.agent)).toBeNull();
  });

  it('a ticket agent has no online reception: never online, no state to choose, no presence', async () => {
    const w = await watched({ level: 'ticket_agent' });
    expect(await codeOf(setAgentState(deps, w.agent, 'busy'))).toBe('FORBIDDEN');
    const tracker = createPresenceTracker(deps);
    expect(await tracker.connected(w.agent)).toBeUndefined();
    expect(await readAgentState(deps, w.agent.agent)).toBe('offline');
    await tracker.close();
    await w.settled();
    expect(w.states()).toEqual([]);
    w.recorder.stop();
  });

  it("the agent must still be its merchant's (SESSION_MISMATCH otherwise)", async () => {
    const w = await watched();
    const other = await make.merchant();
    const moved: AgentViewer = { ...w.agent, merchantId: other.merchantId };
    expect(await refusalOf(setAgentState(deps, moved, 'busy'))).toBe(
      'SESSION_MISMATCH: Invalid parameter: agent not found, please log in again',
    );
    expect(await manualState(w.agent)).toBeNull();
  });

  it('an agent made a ticket agent while connected reads offline: it has no online reception', async () => {
    const w = await watched();
    await make.online(w.agent);
    await deps.db.update(agents).set({ level: 'ticket_agent' }).where(eq(agents.id, w.agent.agentId));
    const [demoted] = await deps.db.select().from(agents).where(eq(agents.id, w.agent.agentId));
    expect(await readAgentState(deps, demoted!)).toBe('offline');
    // Its connection is still there: only the level says offline.
    expect(await deps.presence.stateOf(w.agent.agentId)).toBe('online');
  });
});

describe('connections', () => {
  it('the last connection closed: offline after the grace period, reason disconnected', async () => {
    const w = await watched();
    // No grace period: the settle follows the close at once (its timer still runs after it).
    const tracker = createPresenceTracker({ ...deps, config: { ...deps.config, presenceGraceSeconds: 0 } });
    const first = await tracker.connected(w.agent);
    const second = await tracker.connected(w.agent);
    expect(first).toBeDefined();
    expect(second).not.toBe(first);
    await tracker.disconnected(first);
    await tracker.disconnected(first); // already closed: nothing more
    await tracker.disconnected(undefined);
    await w.settled();
    expect(await readAgentState(deps, w.agent.agent)).toBe('online');
    await tracker.disconnected(second);
    await eventually(() => w.states().length === 2, 'offline');
    expect(w.states()).toEqual([
      ['online', 'connected'],
      ['offline', 'disconnected'],
    ]);
    expect(await readAgentState(deps, w.agent.agent)).toBe('offline');
    await tracker.close();
    w.recorder.stop();
  });

  it('within the grace period a closed connection still counts: a reload does not flap', async () => {
    const w = await watched();
    // A grace of 10 s, so a loaded machine cannot let it pass before the checks below (its timer
    // firing meanwhile would settle the agent concurrently with the sweep); the sweep's clock
    // starts at the moment of the close, as it would just after a reload, and runs on from there
    // (a clock stopped for good would also stop the leases of the publications it makes).
    // The tracker's clock and its grace timer are moved past the grace below instead of waited
    // for: the timer is a fake one whose time runs on with real time (shouldAdvanceTime), so the
    // stores' own timers still fire meanwhile.
    let skipped = 0;
    const tracker = createPresenceTracker({
      ...deps,
      now: () => Date.now() + skipped,
      config: { ...deps.config, presenceGraceSeconds: 10 },
    });
    const closedAt = Date.now();
    const connection = await tracker.connected(w.agent);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'], shouldAdvanceTime: true });
    try {
      await tracker.disconnected(connection);
      const sweepStart = Date.now();
      await settleExpiredPresence({ ...deps, now: () => closedAt + (Date.now() - sweepStart) });
      expect(await readAgentState(deps, w.agent.agent)).toBe('online');
      // close() drops the pending grace timer: nothing is settled after shutdown. An absence shows
      // only past the moment: move beyond the timer, then let anything it started finish (a second
      // close() awaits the tracker's pending work) and arrive.
      await tracker.close();
      skipped = 10_500;
      vi.advanceTimersByTime(skipped);
    } finally {
      vi.useRealTimers();
    }
    await tracker.close();
    await w.settled();
    expect(w.states()).toEqual([['online', 'connected']]);
    w.recorder.stop();
  });

  it('a closed connection lingers for exactly the grace period, then its agent goes offline by the grace timer', async () => {
    const w = await watched();
    const tracker = createPresenceTracker({ ...deps, config: { ...deps.config, presenceGraceSeconds: 0.3 } });
    const connection = await tracker.connected(w.agent);
    const closedAt = Date.now();
    await tracker.disconnected(connection);
    // The lease runs to the close plus the grace (0.3 s), read at a fixed moment, not waited for
    // (a read at a later moment would drop the connection from the embedded store).
    expect(await deps.presence.isOnline(w.agent.agentId, closedAt + 200)).toBe(true);
    // The grace timer fires after the lease ended (not before it, which would settle online and
    // leave the agent shown online until a sweep): offline with no sweep run.
    await eventually(() => w.states().length === 2, 'offline by the grace timer');
    expect(w.states()).toEqual([
      ['online', 'connected'],
      ['offline', 'disconnected'],
    ]);
    await tracker.close();
    w.recorder.stop();
  });

  it('one of two connections ending its grace leaves a busy agent busy (it re-checks connections, not the chosen state)', async () => {
    const w = await watched();
    const tracker = createPresenceTracker({ ...deps, config: { ...deps.config, presenceGraceSeconds: 0 } });
    const [first] = [await tracker.connected(w.agent), await tracker.connected(w.agent)];
    await setAgentState(deps, w.agent, 'busy');
    // The grace timer is a fake one moved past its moment (time still runs for the stores' own
    // timers); close() then waits for the settle it started.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'], shouldAdvanceTime: true });
    try {
      await tracker.disconnected(first);
      vi.advanceTimersByTime(20);
      await tracker.close();
    } finally {
      vi.useRealTimers();
    }
    expect(await deps.presence.isOnline(w.agent.agentId, Date.now())).toBe(true);
    expect(await readAgentState(deps, w.agent.agent)).toBe('busy');
    await w.settled();
    expect(w.states()).toEqual([
      ['online', 'connected'],
      ['busy', 'manual'],
    ]);
    w.recorder.stop();
  });

  it('a presence store failure is logged and the socket still gets its connection', async () => {
    const w = await watched();
    const warnings: string[] = [];
    const log = Object.create(deps.log, { warn: { value: (_: unknown, message: string) => warnings.push(message) } });
    const presence = {
      ...deps.presence,
      touch: async () => {
        throw new Error('presence store down');
      },
    };
    const tracker = createPresenceTracker({ ...deps, log, presence });
    expect(await tracker.connected(w.agent)).toEqual(expect.any(String));
    expect(warnings).toEqual(['presence: connect failed']);
    await tracker.close();
    w.recorder.stop();
  });

  it('connections left behind by a crashed instance expire: the sweep takes their agent offline', async () => {
    const w = await watched();
    const crashed = createPresenceTracker(deps);
    await crashed.connected(w.agent);
    await settleExpiredPresence({ ...deps, now: () => Date.now() + CONNECTION_TTL_MS - 1_000 });
    expect(await readAgentState(deps, w.agent.agent)).toBe('online');
    await settleExpiredPresence({ ...deps, now: () => Date.now() + CONNECTION_TTL_MS + 1_000 });
    expect(await readAgentState(deps, w.agent.agent)).toBe('offline');
    await w.settled();
    expect(w.states()).toEqual([
      ['online', 'connected'],
      ['offline', 'disconnected'],
    ]);
    await crashed.close();
    w.recorder.stop();
  });

  it('the heartbeat brings back a connection dropped as expired (a stalled instance), in the state chosen', async () => {
    const w = await watched();
    // Only the heartbeat's interval is faked: the work it starts runs for real.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let touches = 0;
    const presence = {
      ...deps.presence,
      touch: (...args: Parameters<typeof deps.presence.touch>) => {
        touches++;
        return deps.presence.touch(...args);
      },
    };
    const tracker = createPresenceTracker({ ...deps, presence });
    try {
      tracker.start();
      tracker.start(); // one heartbeat, not two
      await tracker.connected(w.agent);
      await setAgentState(deps, w.agent, 'away');
      await settleExpiredPresence({ ...deps, now: () => Date.now() + CONNECTION_TTL_MS + 1_000 });
      expect(await readAgentState(deps, w.agent.agent)).toBe('offline');
      touches = 0;
      vi.advanceTimersByTime(HEARTBEAT_MS);
      await eventually(async () => (await readAgentState(deps, w.agent.agent)) === 'away', 'back, away');
      expect(touches).toBe(1); // one beat refreshed the one connection
      await w.settled();
      expect(w.states()).toEqual([
        ['online', 'connected'],
        ['away', 'manual'],
        ['offline', 'disconnected'],
        ['away', 'connected'],
      ]);
    } finally {
      await tracker.close();
      vi.useRealTimers();
      w.recorder.stop();
    }
  });
});
