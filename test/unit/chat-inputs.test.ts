import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.js';
import { parseInput } from '../../src/resolvers/inputs.js';
import { MAX_PAGE } from '../../src/resolvers/messages/history.js';
import { MAX_TEXT } from '../../src/resolvers/messages/send.js';
import {
  agentChatListInput,
  agentConversationInput,
  agentHistoryInput,
  agentReadInput,
  agentSendInput,
  agentTypingInput,
  chatAssignInput,
  chatPinInput,
  chatRateInput,
  chatTransferInput,
  chatUnpinInput,
  visitorHistoryInput,
  visitorReadInput,
  visitorSendInput,
  visitorTypingInput,
} from '../../src/rest/chat-inputs.js';

/**
 * The chat's legacy REST inputs (docs/chat.md): snake_case form values, integers and booleans
 * also as the strings a form sends, mapped to the domain's camelCase.
 */

/** The BAD_USER_INPUT message parseInput throws, or 'ok'. */
function refusal(schema: Parameters<typeof parseInput>[0], raw: unknown): string {
  try {
    parseInput(schema, raw);
    return 'ok';
  } catch (error) {
    if (error instanceof DomainError && error.code === 'BAD_USER_INPUT') return error.message;
    throw error;
  }
}

describe('Form values', () => {
  it('an integer is taken as a number or as its decimal string; anything else is refused', () => {
    expect(parseInput(visitorReadInput, { seq: '12' })).toEqual({ seq: 12 });
    expect(parseInput(visitorReadInput, { seq: 12 })).toEqual({ seq: 12 });
    expect(parseInput(visitorReadInput, { seq: '0' })).toEqual({ seq: 0 });
    // A repeated form field (an array) is not a number, even of one element.
    for (const bad of ['1.5', '12abc', 'abc12', '', ' 1', '0x10', true, ['12']])
      expect(refusal(visitorReadInput, { seq: bad }), String(bad)).toMatch(/^seq /);
    // A negative number is read as one, so the answer names the bound it breaks.
    expect(refusal(visitorReadInput, { seq: '-1' })).toBe('seq Number must be greater than or equal to 0');
    expect(refusal(visitorReadInput, {})).toBe('seq is required');
  });

  it('a seq is a 32-bit position: 0 … 2^31-1', () => {
    expect(parseInput(agentReadInput, { visitor_id: 'v1', seq: String(2 ** 31 - 1) })).toEqual({
      visitorId: 'v1',
      seq: 2 ** 31 - 1,
    });
    expect(refusal(agentReadInput, { visitor_id: 'v1', seq: 2 ** 31 })).toMatch(/^seq /);
  });

  it('a boolean is true/false, or the strings true, false, 1 and 0', () => {
    for (const [raw, typing] of [
      ['true', true],
      ['1', true],
      [true, true],
      ['false', false],
      ['0', false],
      [false, false],
    ] as const)
      expect(parseInput(visitorTypingInput, { typing: raw }), String(raw)).toEqual({ typing });
    expect(parseInput(visitorTypingInput, {})).toEqual({});
    for (const bad of ['yes', 'TRUE', '2', 1, ''])
      expect(refusal(visitorTypingInput, { typing: bad }), String(bad)).toBe('typing must be true or false');
  });

  it('a history page holds 1 … MAX_PAGE messages; limit is optional', () => {
    expect(parseInput(visitorHistoryInput, {})).toEqual({ before: undefined, after: undefined, limit: undefined });
    expect(parseInput(visitorHistoryInput, { limit: '1' }).limit).toBe(1);
    expect(parseInput(visitorHistoryInput, { limit: String(MAX_PAGE) }).limit).toBe(MAX_PAGE);
    expect(refusal(visitorHistoryInput, { limit: '0' })).toMatch(/^limit /);
    expect(refusal(visitorHistoryInput, { limit: MAX_PAGE + 1 })).toMatch(/^limit /);
    expect(parseInput(visitorHistoryInput, { before: 'c1', after: 'c2', limit: 5 })).toEqual({
      before: 'c1',
      after: 'c2',
      limit: 5,
    });
    expect(refusal(visitorHistoryInput, { before: 'x'.repeat(201) })).toBe('before must be at most 200 characters');
  });
});

describe('Sending', () => {
  it('client_msg_id is required; the legacy names map to the domain input', () => {
    expect(
      parseInput(visitorSendInput, { client_msg_id: 'k1', type: 'image', content: 'hi', attachment_id: 'att1' }),
    ).toEqual({ clientMsgId: 'k1', type: 'image', content: 'hi', attachmentId: 'att1' });
    expect(refusal(visitorSendInput, { content: 'hi' })).toBe('client_msg_id is required');
    expect(refusal(visitorSendInput, { client_msg_id: '  ', content: 'hi' })).toBe('client_msg_id is required');
    expect(refusal(visitorSendInput, { client_msg_id: 'k'.repeat(65) })).toMatch(/^client_msg_id /);
  });

  it('the five message types, nothing else; text up to MAX_TEXT characters', () => {
    for (const type of ['text', 'image', 'file', 'voice', 'video'])
      expect(parseInput(visitorSendInput, { client_msg_id: 'k', type }).type).toBe(type);
    expect(refusal(visitorSendInput, { client_msg_id: 'k', type: 'system' })).toMatch(/^type /);
    expect(parseInput(visitorSendInput, { client_msg_id: 'k', content: 'x'.repeat(MAX_TEXT) }).content).toHaveLength(
      MAX_TEXT,
    );
    expect(refusal(visitorSendInput, { client_msg_id: 'k', content: 'x'.repeat(MAX_TEXT + 1) })).toMatch(/^content /);
    expect(refusal(visitorSendInput, { client_msg_id: 'k', attachment_id: ' ' })).toMatch(/^attachment_id /);
  });

  it('an agent names the visitor it writes to', () => {
    expect(parseInput(agentSendInput, { visitor_id: 'v1', client_msg_id: 'k', content: 'hello' })).toEqual({
      visitorId: 'v1',
      clientMsgId: 'k',
      type: undefined,
      content: 'hello',
      attachmentId: undefined,
    });
    expect(refusal(agentSendInput, { client_msg_id: 'k', content: 'hello' })).toBe('visitor_id is required');
  });
});

describe('Conversations', () => {
  it('assign takes an optional group_id and agent_id', () => {
    expect(parseInput(chatAssignInput, {})).toEqual({ groupId: undefined, agentId: undefined });
    expect(parseInput(chatAssignInput, { group_id: 'g1', agent_id: 'a1' })).toEqual({ groupId: 'g1', agentId: 'a1' });
    expect(refusal(chatAssignInput, { group_id: 'g'.repeat(65) })).toMatch(/^group_id /);
  });

  it('a rating is a score of 1 … 5, with optional resolved and a comment of up to 1000 characters', () => {
    expect(parseInput(chatRateInput, { conversation_id: 'c1', score: '5', resolved: '0', comment: 'fine' })).toEqual({
      conversationId: 'c1',
      score: 5,
      resolved: false,
      comment: 'fine',
    });
    expect(parseInput(chatRateInput, { score: 1 }).score).toBe(1);
    expect(refusal(chatRateInput, { score: 0 })).toMatch(/^score /);
    expect(refusal(chatRateInput, { score: '6' })).toMatch(/^score /);
    expect(refusal(chatRateInput, {})).toBe('score is required');
    expect(parseInput(chatRateInput, { score: 3, comment: 'c'.repeat(1000) }).comment).toHaveLength(1000);
    expect(refusal(chatRateInput, { score: 3, comment: 'c'.repeat(1001) })).toMatch(/^comment /);
  });

  it('an agent addresses a conversation by its visitor; pin pins, unpin unpins', () => {
    expect(parseInput(agentConversationInput, { visitor_id: 'v1' })).toEqual({ visitorId: 'v1' });
    expect(refusal(agentConversationInput, {})).toBe('visitor_id is required');
    expect(parseInput(chatPinInput, { visitor_id: 'v1' })).toEqual({ visitorId: 'v1', pinned: true });
    expect(parseInput(chatUnpinInput, { visitor_id: 'v1' })).toEqual({ visitorId: 'v1', pinned: false });
  });

  it('transfer names the visitor and, optionally, the agent or group it goes to', () => {
    expect(parseInput(chatTransferInput, { visitor_id: 'v1', to_agent_id: 'a2', group_id: 'g2' })).toEqual({
      visitorId: 'v1',
      toAgentId: 'a2',
      groupId: 'g2',
    });
    expect(refusal(chatTransferInput, { to_agent_id: 'a2' })).toBe('visitor_id is required');
  });

  it('the list takes a scope of mine, queue or all, a cursor and a page size', () => {
    for (const scope of ['mine', 'queue', 'all']) expect(parseInput(agentChatListInput, { scope }).scope).toBe(scope);
    expect(refusal(agentChatListInput, { scope: 'other' })).toMatch(/^scope /);
    expect(parseInput(agentChatListInput, { after: 'cur', limit: '7' })).toEqual({
      scope: undefined,
      after: 'cur',
      first: 7,
    });
    expect(refusal(agentChatListInput, { after: 'x'.repeat(201) })).toMatch(/^after /);
  });

  it('an agent’s history, read and typing name the visitor', () => {
    expect(parseInput(agentHistoryInput, { visitor_id: 'v1', before: '3', limit: '2' })).toEqual({
      visitorId: 'v1',
      before: '3',
      after: undefined,
      limit: 2,
    });
    expect(refusal(agentHistoryInput, { before: '3' })).toBe('visitor_id is required');
    expect(parseInput(agentTypingInput, { visitor_id: 'v1', typing: 'false' })).toEqual({
      visitorId: 'v1',
      typing: false,
    });
    expect(refusal(agentReadInput, { seq: 1 })).toBe('visitor_id is required');
  });
});
