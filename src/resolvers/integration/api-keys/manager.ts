import { type AuditEntry, auditedAgent } from '../../desk/audit.js';
import { type AgentViewer, requireAdmin } from '../../viewer.js';
import type { ApiKeyViewer } from './authenticate.js';
import { type ApiKeyScope, requireScope } from './scopes.js';

/**
 * Who may run a merchant operation that a server may also call (the webhook management): an
 * admin agent, or an API key with the operation's scope (docs/integration.md "API keys").
 */
export type MerchantManager = AgentViewer | ApiKeyViewer;

/** An admin agent (else FORBIDDEN), or a key with `scope` (else INSUFFICIENT_SCOPE). */
export function requireManager<V extends MerchantManager>(viewer: V, scope: ApiKeyScope): V {
  if (viewer.kind === 'apiKey') requireScope(viewer, scope);
  else requireAdmin(viewer);
  return viewer;
}

/** The actor and address an audit row names for the manager: the agent, or the key (`api_key`, its id and name). */
export function auditedManager(viewer: MerchantManager): Pick<AuditEntry, 'actor' | 'clientAddress' | 'merchantId'> {
  if (viewer.kind === 'agent') return auditedAgent(viewer);
  return {
    merchantId: viewer.merchantId,
    actor: { kind: 'api_key', id: viewer.keyId, name: viewer.name },
    clientAddress: viewer.clientAddress ?? null,
  };
}
