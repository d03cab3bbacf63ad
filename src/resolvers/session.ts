/**
 * What the domain keeps in an agent's login Session, and the port through which it reads and
 * changes it; the HTTP and WebSocket adapters implement the port over express-session.
 */
export interface SessionState {
  /** Milliseconds since the epoch when this Session ID was issued; bounds its absolute lifetime. */
  createdAt?: number;
  agent?: { agentId: string; merchantId: string; bid: string; level: string };
  /** Optional push identifier given at login. */
  cid?: string;
  /**
   * A pending SMS verification code, bound to the number it was sent to; `id` names its
   * counter of tries in the shared store (random, so the key says nothing about the code).
   */
  sms?: { id: string; mobile: string; codeHash: string; expiresAt: number };
  /** The mobile number whose SMS code was verified in this Session. */
  smsVerifiedMobile?: string;
  /**
   * Where and from what this Session was last used over HTTP (refreshed at most once a minute):
   * what `mySessions` shows. Sockets do not refresh it.
   */
  seen?: { address: string; device: string; at: number };
}

/** The request a Session port belongs to, as the Session list shows it. */
export interface SessionClient {
  /** The client address (TRUST_PROXY rules applied). */
  address: string;
  /** The User-Agent, cut to 200 characters. */
  device: string;
}

export interface SessionPort {
  /** The current Session ID (changes after `regenerate`). */
  readonly id: string;
  readonly state: SessionState;
  /** Replaces the Session with a fresh one under a new ID (no fixation). */
  regenerate(): Promise<void>;
  /** Persists changes made to `state` now rather than at the end of the request. */
  save(): Promise<void>;
  destroy(): Promise<void>;
  /** The HTTP request this port belongs to; absent outside a request (sockets, stored Sessions). */
  readonly client?: SessionClient;
}

/**
 * The stored Sessions, by ID, for the Session list and for ending another Session than the
 * caller's own; implemented over the HTTP session store by the adapters. A read does not extend
 * a Session's lifetime.
 */
export interface SessionDirectory {
  peek(sessionId: string): Promise<SessionState | undefined>;
  destroy(sessionId: string): Promise<void>;
}

/** How often a Session's `seen` is refreshed at most. */
export const SEEN_REFRESH_MS = 60_000;

/** Records the port's request as the Session's latest use, when a minute has passed or the address changed. */
export function noteSessionSeen(session: SessionPort, now: number) {
  const client = session.client;
  if (!client) return;
  const seen = session.state.seen;
  if (seen && now - seen.at < SEEN_REFRESH_MS && seen.address === client.address && seen.device === client.device)
    return;
  session.state.seen = { address: client.address, device: client.device, at: now };
}

/** The index of an agent's Session IDs, so logout-everywhere and account disable can end them all. */
export const agentSessionsKey = (agentId: string) => `agent-sessions:${agentId}`;
