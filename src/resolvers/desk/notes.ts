import { and, asc, eq, or, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import { agents, type ConversationNote, conversationNotes, conversations } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { latestConversation, openConversation, requireMerchantVisitor } from '../chat-rows.js';
import type { NoteView } from '../event-catalog.js';
import { agentChannel } from '../events.js';
import { parseInput, required } from '../inputs.js';
import { historyOnlyMine } from '../messages/history.js';
import { enqueueRows, outboxRows, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type AgentViewer, requireOnlineReception } from '../viewer.js';

/**
 * Internal notes: an agent's remark on a visitor's conversation, for the merchant's agents only.
 *
 * The model (docs/desk.md "Internal notes"): a note is a row of its own table, never a message.
 * It takes no `seq`, so nothing the visitor side reads — its history (REST and GraphQL), the
 * `message.created` events on its channel, seq-gap detection, unread counts, resume with `since`
 * — can see or trip over it. Its place in the history is `afterSeq`, the conversation's `last_seq`
 * when it was written; the workbench shows it after that message. Its one event, `note.created`,
 * goes to agent channels only (the assigned agent and the author).
 */

/** Longest note, in characters. */
export const MAX_NOTE = 2000;
/** Notes one conversation may hold. */
export const MAX_NOTES_PER_CONVERSATION = 200;

const id = required(64);
export const addNoteInput = z.object({ visitorId: id, content: required(MAX_NOTE) });
export type AddNoteInput = z.input<typeof addNoteInput>;
export const listNotesInput = z.object({ visitorId: id });
export type ListNotesInput = z.input<typeof listNotesInput>;

const toNoteView = (n: ConversationNote, agentNickname: string | null): NoteView => ({
  id: n.id,
  conversationId: n.conversationId,
  visitorId: n.visitorId,
  agentId: n.agentId,
  agentNickname: agentNickname ?? '',
  afterSeq: n.afterSeq,
  content: n.content,
  createdAt: n.createdAt.getTime(),
});

/**
 * Writes a note on the visitor's conversation (its open one, else its latest). Any agent of the
 * merchant who does online reception may write one; the visitor never learns of it.
 */
export async function addNote(deps: Deps, viewer: AgentViewer, input: AddNoteInput): Promise<NoteView> {
  requireOnlineReception(viewer);
  const { visitorId, content } = parseInput(addNoteInput, input);
  await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const note = await deps.db.transaction(async (tx) => {
    // The conversation's row lock orders the note after the messages already committed.
    const ctx =
      (await openConversation(tx, viewer.merchantId, visitorId, { lock: true })) ??
      (await latestConversation(tx, viewer.merchantId, visitorId));
    if (!ctx) throw new DomainError('NOT_FOUND', 'This visitor has no conversation to note on yet');
    const c = ctx.conversation;
    const [held] = await tx
      .select({ n: conversationNotes.id })
      .from(conversationNotes)
      .where(eq(conversationNotes.conversationId, c.id))
      .offset(MAX_NOTES_PER_CONVERSATION - 1)
      .limit(1);
    if (held)
      throw new DomainError('LIMIT_REACHED', `A conversation holds at most ${MAX_NOTES_PER_CONVERSATION} notes`);
    const [row] = await tx
      .insert(conversationNotes)
      .values({
        id: newId('note'),
        merchantId: viewer.merchantId,
        conversationId: c.id,
        visitorId,
        agentId: viewer.agentId,
        afterSeq: c.lastSeq,
        content,
        createdAt: new Date(deps.now()),
      })
      .returning();
    if (!row) throw new Error('note insert returned nothing');
    const view = toNoteView(row, viewer.agent.nickname);
    // Agent channels only: never the visitor's channel (see the model above).
    const to = new Set([agentChannel(viewer.agentId), ...(c.agentId ? [agentChannel(c.agentId)] : [])]);
    await enqueueRows(tx, outboxRows(visitorKey(c.visitorId), to, 'note.created', { note: view }));
    return view;
  });
  await publishOutbox(deps, visitorKey(note.visitorId));
  return note;
}

/**
 * The notes of a visitor's conversations, in history order (conversation, then `afterSeq`, then
 * time). Under `history_only_mine` an agent sees the notes of the conversations it may read.
 */
export async function listNotes(deps: Deps, viewer: AgentViewer, input: ListNotesInput): Promise<NoteView[]> {
  requireOnlineReception(viewer);
  const { visitorId } = parseInput(listNotesInput, input);
  await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const where: (SQL | undefined)[] = [
    eq(conversationNotes.merchantId, viewer.merchantId),
    eq(conversationNotes.visitorId, visitorId),
  ];
  if (await historyOnlyMine(deps, viewer))
    where.push(or(eq(conversations.agentId, viewer.agentId), eq(conversations.state, 'queued')));
  const rows = await deps.db
    .select({ n: conversationNotes, nickname: agents.nickname })
    .from(conversationNotes)
    .innerJoin(conversations, eq(conversations.id, conversationNotes.conversationId))
    .leftJoin(agents, eq(agents.id, conversationNotes.agentId))
    .where(and(...where))
    .orderBy(
      asc(conversations.createdAt),
      asc(conversations.id),
      asc(conversationNotes.afterSeq),
      asc(conversationNotes.createdAt),
      asc(conversationNotes.id),
    )
    .limit(MAX_NOTES_PER_CONVERSATION * 5);
  return rows.map((r) => toNoteView(r.n, r.nickname));
}
