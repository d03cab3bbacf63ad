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
}

/** The index of an agent's Session IDs, so logout-everywhere and account disable can end them all. */
export const agentSessionsKey = (agentId: string) => `agent-sessions:${agentId}`;
