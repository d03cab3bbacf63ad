import type { Deps } from '../deps.js';
import { globalChannel, publishQuietly } from './events.js';
import { UNSAFE_IN_NAMES } from './inputs.js';

/**
 * Which visitors this process announced lately, and until when (per Deps, so apps built in one
 * process stay apart): a bootstrap repeated within the interval costs no store round trip. At
 * most ANNOUNCED_MEMO_SIZE entries; past that, expired entries go, then all of them.
 */
const announcedUntil = new WeakMap<Deps, Map<string, number>>();
const ANNOUNCED_MEMO_SIZE = 50_000;

/**
 * Publishes `visitor.online` on `global-{bid}` at most once per visitor per
 * VISITOR_ONLINE_INTERVAL_SECONDS however often (and on however many instances) the bootstrap
 * is called: a marker key set-if-absent in the shared store decides. A flood of bootstraps (or
 * aliased GraphQL fields) then cannot flood the agents' channel and evict its history. The
 * nickname is stripped of control and bidirectional characters (names stored before the input
 * rule). Never throws: the bootstrap does not wait for it.
 */
export async function announceOnline(deps: Deps, bid: string, visitor: { id: string; nickname: string }) {
  const interval = deps.config.hardening.visitorOnlineIntervalSeconds;
  const now = deps.now();
  const memo = announcedUntil.get(deps) ?? new Map<string, number>();
  announcedUntil.set(deps, memo);
  if ((memo.get(visitor.id) ?? 0) > now) return;
  if (memo.size >= ANNOUNCED_MEMO_SIZE) {
    for (const [id, until] of memo) if (until <= now) memo.delete(id);
    if (memo.size >= ANNOUNCED_MEMO_SIZE) memo.clear();
  }
  memo.set(visitor.id, now + interval * 1000);
  try {
    if (!(await deps.kv.setIfAbsent(`visitor-online:${visitor.id}`, '1', interval))) return;
  } catch (error) {
    memo.delete(visitor.id);
    deps.log.warn({ err: (error as Error).message }, 'visitor.online not published');
    return;
  }
  await publishQuietly(deps, globalChannel(bid), 'visitor.online', {
    uid: visitor.id,
    nickname: visitor.nickname.replace(UNSAFE_IN_NAMES, ''),
  });
}
