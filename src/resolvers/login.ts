import { eq, sql } from 'drizzle-orm';
import { verifyPassword } from '../auth/passwords.js';
import { preparedQuery } from '../db/prepared.js';
import { type Agent, agents, merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError, notLoggedIn } from '../errors.js';
import { checkCaptcha } from './captcha.js';
import { globalChannel, publishQuietly } from './events.js';
import { agentSessionsKey, noteSessionSeen, type SessionPort } from './session.js';
import { endSession, TICKET_AGENT } from './viewer.js';

interface LoginInput {
  username: string;
  password: string;
  captcha: string;
  cid?: string;
}

export interface LoginResult {
  /** The new Session ID, usable as the `token` header or query parameter. */
  token: string;
  redirect: string;
}

/** Where each role lands after login; ticket agents have their own entry. */
export const WORKBENCH_PATH = '/agent/';
export const TICKET_ENTRY_PATH = '/agent/ticket';

// Brute-force limits: attempts per account (case-folded; a success resets them) and failed
// attempts per client address, each within 15 minutes, then locked for 15 minutes. Both are
// counted before the password is compared (a success gives the address's point back), so a burst
// of parallel guesses gets no more compared than the limit.
const ACCOUNT_ATTEMPTS = { name: 'login-account', points: 5, durationSeconds: 900, blockSeconds: 900 };
const IP_FAILURES = { name: 'login-fail-ip', points: 30, durationSeconds: 900, blockSeconds: 900 };
/**
 * The account lock must not deny service: an address the account logged in from successfully
 * within KNOWN_ADDRESS_TTL_SECONDS keeps a budget of its own while the account is locked, so an
 * attacker elsewhere cannot lock the agent out of its usual office (guesses from that address are
 * still limited, to this many).
 */
const KNOWN_ADDRESS_ATTEMPTS = { name: 'login-known-address', points: 5, durationSeconds: 900, blockSeconds: 900 };
const KNOWN_ADDRESS_TTL_SECONDS = 30 * 86_400;
const knownAddressKey = (account: string, clientIp: string) => `login-known:${account}:${clientIp}`;

const LOGIN_FAILED_MSG = 'Wrong username or password';

/**
 * Logs an agent in: the captcha is consumed first (before any password hashing), then the
 * password is checked at the same cost whether or not the user exists, and on success the
 * Session is regenerated so the pre-login ID is useless.
 */
export async function login(
  deps: Deps,
  session: SessionPort,
  input: LoginInput,
  clientIp: string,
): Promise<LoginResult> {
  // Round trips are batched (BENCHMARKS.md, login): each `Promise.all` below is one wait for the
  // stores, and the captcha's own point comes back in the same wait as the login attempts.
  const captchaOk = await checkCaptcha(deps, session.id, 'login', input.captcha, clientIp);

  const account = input.username.trim().toLowerCase();
  const accountLimiter = deps.rateLimiter(ACCOUNT_ATTEMPTS);
  const ipLimiter = deps.rateLimiter(IP_FAILURES);
  // Both attempts are taken before the password is compared (atomically, in the shared store),
  // so a burst of parallel guesses gets no more than the limits compared. The address's point is
  // given back on success: it counts failures only, as many agents share one NAT.
  const [accountSpent, ipSpent, [row]] = await Promise.all([
    accountLimiter.consume(account, () => LOGIN_FAILED_MSG).then(() => false, spent),
    ipLimiter.consume(clientIp, () => LOGIN_FAILED_MSG).then(() => false, spent),
    agentByLogin(deps.db).execute({ account }),
    captchaOk.reward(),
  ]);
  // A locked account still lets in an address it logged in from before, within that address's own budget.
  const accountLocked = accountSpent && !(await knownAddressMayTry(deps, account, clientIp));

  // Always hash, so a locked account, an unknown user and a wrong password cost the same time.
  const passwordOk = await verifyPassword(row?.agent.passwordHash, input.password);

  if (accountLocked || ipSpent) deps.metrics.loginLocked(accountLocked ? 'account' : 'ip');
  if (accountLocked || ipSpent) throw new DomainError('LOGIN_FAILED', LOGIN_FAILED_MSG);
  if (!row || !passwordOk) {
    deps.metrics.loginFailed('credentials');
    throw new DomainError('LOGIN_FAILED', LOGIN_FAILED_MSG);
  }
  const { agent, bid } = row;
  if (agent.disabled) deps.metrics.loginFailed('disabled');
  if (agent.disabled) throw new DomainError('ACCOUNT_DISABLED', 'This agent account is disabled');
  await Promise.all([
    accountLimiter.reset(account),
    ipLimiter.reward(clientIp),
    deps.kv.set(knownAddressKey(account, clientIp), '1', KNOWN_ADDRESS_TTL_SECONDS),
    session.regenerate(),
  ]);
  await startAgentSession(deps, session, agent, bid, input.cid);
  return { token: session.id, redirect: agent.level === TICKET_AGENT ? TICKET_ENTRY_PATH : WORKBENCH_PATH };
}

/**
 * Logs `agent` in on a freshly regenerated Session: its identity, creation time and first use
 * are stored, the Session is indexed under the agent, and `agent.login` is announced.
 */
export async function startAgentSession(
  deps: Deps,
  session: SessionPort,
  agent: Pick<Agent, 'id' | 'merchantId' | 'level' | 'nickname'>,
  bid: string,
  cid?: string,
) {
  session.state.createdAt = deps.now();
  noteSessionSeen(session, deps.now());
  session.state.agent = { agentId: agent.id, merchantId: agent.merchantId, bid, level: agent.level };
  if (cid) session.state.cid = cid;
  // The Session, its index entry and the announcement in one wait (a write never recreates an ended Session).
  await Promise.all([
    session.save(),
    deps.kv.addToSet(agentSessionsKey(agent.id), session.id, deps.config.sessionAbsoluteTtlSeconds),
    publishQuietly(deps, globalChannel(bid), 'agent.login', { agentId: agent.id, nickname: agent.nickname }),
  ]);
}

/** The agent of a login name (case-folded) with its merchant's bid: a prepared statement. */
const agentByLogin = preparedQuery((db) =>
  db
    .select({ agent: agents, bid: merchants.bid })
    .from(agents)
    .innerJoin(merchants, eq(merchants.id, agents.merchantId))
    .where(eq(sql`lower(${agents.username})`, sql.placeholder('account')))
    .limit(1)
    .prepare('agent_by_login'),
);

/** A rate limit's refusal as `true` (spent); any other error goes on. */
function spent(error: unknown): boolean {
  if (error instanceof DomainError && error.code === 'RATE_LIMITED') return true;
  throw error;
}

/** Whether `clientIp` logged in to `account` before and still has attempts of its own while the account is locked. */
async function knownAddressMayTry(deps: Deps, account: string, clientIp: string): Promise<boolean> {
  if ((await deps.kv.get(knownAddressKey(account, clientIp))) === null) return false;
  return deps
    .rateLimiter(KNOWN_ADDRESS_ATTEMPTS)
    .consume(`${account}|${clientIp}`, () => LOGIN_FAILED_MSG)
    .then(
      () => true,
      (error: unknown) => !spent(error),
    );
}

/**
 * Ends the Session; the agent's other Sessions (other browsers) stay. Without a logged-in
 * Session it is the guard's usual "please log in" (any leftover anonymous Session goes too).
 */
export async function logout(deps: Deps, session: SessionPort): Promise<void> {
  const identity = session.state.agent;
  if (!identity) {
    await session.destroy();
    throw notLoggedIn();
  }
  await endSession(deps, session, identity.agentId, 'logout');
  await publishQuietly(deps, globalChannel(identity.bid), 'agent.logout', { agentId: identity.agentId });
}
