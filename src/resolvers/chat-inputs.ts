import { z } from 'zod';
import { required, text } from './inputs.js';
import { MAX_PAGE, MAX_TEXT } from './messages.js';

/**
 * The legacy REST inputs of the chat (snake_case, form values as strings), transformed to the
 * domain's camelCase inputs; re-exported by inputs.ts with the other contracts.
 */

const id = required(64);
/** An integer, also as the string a form sends. */
// Stryker disable next-line ArrowFunction: the mutant throws while every importer loads, which the vitest runner reports as no test run (a survivor), not a failure
const int = (min: number, max: number) =>
  z.preprocess((v) => (typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v), z.number().int().min(min).max(max));
/** A boolean, also as `true`/`false`/`1`/`0` from a form. */
const bool = z.preprocess(
  (v) => (v === 'true' || v === '1' ? true : v === 'false' || v === '0' ? false : v),
  z.boolean({ invalid_type_error: 'must be true or false' }),
);
/** A page cursor (`start_cursor` / `end_cursor`) or a bare seq. */
const cursor = text(200);
const limit = int(1, MAX_PAGE).optional();
const seq = int(0, 2 ** 31 - 1);

const sendFields = {
  client_msg_id: required(64),
  type: z.enum(['text', 'image', 'file', 'voice', 'video']).optional(),
  content: text(MAX_TEXT).optional(),
  attachment_id: id.optional(),
};
const toSend = (i: { client_msg_id: string; type?: string; content?: string; attachment_id?: string }) => ({
  clientMsgId: i.client_msg_id,
  type: i.type,
  content: i.content,
  attachmentId: i.attachment_id,
});

export const chatAssignInput = z
  .object({ group_id: id.optional(), agent_id: id.optional() })
  .transform((i) => ({ groupId: i.group_id, agentId: i.agent_id }));
export const visitorSendInput = z.object(sendFields).transform(toSend);
export const visitorHistoryInput = z
  .object({ before: cursor.optional(), after: cursor.optional(), limit })
  .transform((i) => ({ before: i.before, after: i.after, limit: i.limit }));
export const visitorReadInput = z.object({ seq });
export const visitorTypingInput = z.object({ typing: bool.optional() });
export const chatRateInput = z
  .object({
    conversation_id: id.optional(),
    score: int(1, 5),
    resolved: bool.optional(),
    comment: text(1000).optional(),
  })
  .transform((i) => ({ conversationId: i.conversation_id, score: i.score, resolved: i.resolved, comment: i.comment }));
export const agentConversationInput = z.object({ visitor_id: id }).transform((i) => ({ visitorId: i.visitor_id }));
export const chatTransferInput = z
  .object({ visitor_id: id, to_agent_id: id.optional(), group_id: id.optional() })
  .transform((i) => ({ visitorId: i.visitor_id, toAgentId: i.to_agent_id, groupId: i.group_id }));
export const chatPinInput = z.object({ visitor_id: id }).transform((i) => ({ visitorId: i.visitor_id, pinned: true }));
export const chatUnpinInput = z
  .object({ visitor_id: id })
  .transform((i) => ({ visitorId: i.visitor_id, pinned: false }));
export const agentChatListInput = z
  .object({
    scope: z.enum(['mine', 'queue', 'all']).optional(),
    after: text(200).optional(),
    limit,
    label_id: id.optional(),
  })
  .transform((i) => ({ scope: i.scope, after: i.after, first: i.limit, labelId: i.label_id }));
export const agentSendInput = z
  .object({ visitor_id: id, ...sendFields })
  .transform((i) => ({ visitorId: i.visitor_id, ...toSend(i) }));
export const agentHistoryInput = z
  .object({ visitor_id: id, before: cursor.optional(), after: cursor.optional(), limit })
  .transform((i) => ({ visitorId: i.visitor_id, before: i.before, after: i.after, limit: i.limit }));
export const agentReadInput = z
  .object({ visitor_id: id, seq })
  .transform((i) => ({ visitorId: i.visitor_id, seq: i.seq }));
export const agentTypingInput = z
  .object({ visitor_id: id, typing: bool.optional() })
  .transform((i) => ({ visitorId: i.visitor_id, typing: i.typing }));
