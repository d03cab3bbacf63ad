import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import type { ChannelEvent } from '../stores/bus.js';
import { agentChannel, globalChannel, sessionFingerprint } from './events.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from './viewer.js';

export type ChannelViewer = AgentViewer | VisitorViewer;

/**
 * Who may listen where: a visitor to its own generated channel only; an agent (not a ticket
 * agent) to `agent-{its id}` and `global-{its merchant's bid}` only.
 */
export function authorizeChannel(viewer: ChannelViewer, name: string): void {
  if (viewer.kind === 'visitor') {
    if (name === viewer.channel) return;
  } else {
    requireOnlineReception(viewer);
    if (name === agentChannel(viewer.agentId) || name === globalChannel(viewer.bid)) return;
  }
  throw new DomainError('FORBIDDEN', `Not allowed to subscribe to channel ${JSON.stringify(name.slice(0, 100))}`);
}

/**
 * The events of an authorized channel (replaying from `since` first). An agent's subscription
 * ends with a final `session.ended` event when its Session is ended anywhere (logout, disable,
 * expiry), so the client knows to log in again.
 */
export async function* subscribeChannel(
  deps: Deps,
  viewer: ChannelViewer,
  name: string,
  opts: { since?: string; signal?: AbortSignal } = {},
): AsyncGenerator<ChannelEvent> {
  authorizeChannel(viewer, name);
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort();
  opts.signal?.addEventListener('abort', onOuterAbort);
  let ended: ChannelEvent | undefined;
  if (viewer.kind === 'agent' && name !== agentChannel(viewer.agentId)) {
    void watchSessionEnd(deps, viewer, stop.signal).then((event) => {
      if (!event) return;
      ended = { ...event, channel: name };
      stop.abort();
    });
  }
  try {
    for await (const event of deps.bus.subscribe(name, { since: opts.since, signal: stop.signal })) {
      yield event;
      if (viewer.kind === 'agent' && endsSession(event, viewer)) return;
    }
    if (ended) yield ended;
  } finally {
    opts.signal?.removeEventListener('abort', onOuterAbort);
    stop.abort();
  }
}

const endsSession = (event: ChannelEvent, viewer: AgentViewer) =>
  event.event === 'session.ended' &&
  ((event.data as { sessions?: string[] }).sessions ?? []).includes(sessionFingerprint(viewer.session.id));

async function watchSessionEnd(deps: Deps, viewer: AgentViewer, signal: AbortSignal) {
  for await (const event of deps.bus.subscribe(agentChannel(viewer.agentId), { signal })) {
    if (endsSession(event, viewer)) return event;
  }
  return undefined;
}

/** The internal publish API: services the spec leaves out (messages, assignment) post events here. */
export async function publishEvent(deps: Deps, input: { channel: string; event: string; data: unknown }) {
  return deps.bus.publish(input.channel, input.event, input.data);
}
