import { pinInput } from '../resolvers/conversations/agent-actions.js';
import { visitorRef } from '../resolvers/conversations/context.js';
import { listInput } from '../resolvers/conversations/queries.js';
import { rateInput } from '../resolvers/conversations/rating.js';
import { assignInput } from '../resolvers/conversations/routing.js';
import { transferInput } from '../resolvers/conversations/transfer.js';
import { historyInput } from '../resolvers/messages/history.js';
import { readInput } from '../resolvers/messages/read.js';
import { sendInput } from '../resolvers/messages/send.js';
import { typingInput } from '../resolvers/messages/typing.js';
import { formBool, formInt, legacyInput } from './legacy-input.js';

/**
 * The legacy names of the chat's REST inputs (docs/chat.md) over the domain's own input schemas:
 * snake_case keys, and integers and booleans also as the strings a form sends.
 */

const sendKeys = {
  client_msg_id: 'clientMsgId',
  type: 'type',
  content: 'content',
  attachment_id: 'attachmentId',
} as const;
const historyKeys = { before: 'before', after: 'after', limit: 'limit' } as const;

export const chatAssignInput = legacyInput(assignInput, {
  group_id: 'groupId',
  agent_id: 'agentId',
  entry_page: 'entryPage',
});
export const visitorSendInput = legacyInput(sendInput, sendKeys);
export const visitorHistoryInput = legacyInput(historyInput, historyKeys, { form: { limit: formInt } });
export const visitorReadInput = legacyInput(readInput, { seq: 'seq' }, { form: { seq: formInt } });
export const visitorTypingInput = legacyInput(typingInput, { typing: 'typing' }, { form: { typing: formBool } });
export const chatRateInput = legacyInput(
  rateInput,
  { conversation_id: 'conversationId', score: 'score', resolved: 'resolved', comment: 'comment' },
  { form: { score: formInt, resolved: formBool } },
);
export const agentConversationInput = legacyInput(visitorRef, { visitor_id: 'visitorId' });
export const chatTransferInput = legacyInput(transferInput, {
  visitor_id: 'visitorId',
  to_agent_id: 'toAgentId',
  group_id: 'groupId',
});
export const chatPinInput = legacyInput(pinInput, { visitor_id: 'visitorId' }, { fixed: { pinned: true } });
export const chatUnpinInput = legacyInput(pinInput, { visitor_id: 'visitorId' }, { fixed: { pinned: false } });
export const agentChatListInput = legacyInput(
  listInput,
  { scope: 'scope', after: 'after', limit: 'first', label_id: 'labelId' },
  { form: { limit: formInt } },
);
/** An agent names the visitor (the domain's inputs leave it optional: a visitor addresses its own). */
const agent = ['visitor_id' as const];
export const agentSendInput = legacyInput(sendInput, { visitor_id: 'visitorId', ...sendKeys }, { required: agent });
export const agentHistoryInput = legacyInput(
  historyInput,
  { visitor_id: 'visitorId', ...historyKeys },
  { form: { limit: formInt }, required: agent },
);
export const agentReadInput = legacyInput(
  readInput,
  { visitor_id: 'visitorId', seq: 'seq' },
  { form: { seq: formInt }, required: agent },
);
export const agentTypingInput = legacyInput(
  typingInput,
  { visitor_id: 'visitorId', typing: 'typing' },
  { form: { typing: formBool }, required: agent },
);
