/**
 * Every event the gateway publishes, declared once: where it goes, what it means, its wire
 * payload (snake_case, like the REST it sits beside) and the mapping from the domain's
 * camelCase. `publish` (events.ts) is typed by it, the GraphQL description of `channel` and
 * the event table of docs/realtime.md are checked against it, and POST /internal/events may not use these
 * names. Events a channel itself produces (`subscribed`, `history.gap`) are declared too, with
 * `origin: 'bus'`.
 */
import { availabilityEvents } from './event-catalog/availability.js';
import { channelEvents } from './event-catalog/channel.js';
import { conversationEvents } from './event-catalog/conversations.js';
import type { EventDeclaration } from './event-catalog/declaration.js';
import { integrationEvents } from './event-catalog/integration.js';
import { messageEvents } from './event-catalog/messages.js';
import { noteEvents } from './event-catalog/notes.js';
import { presenceEvents } from './event-catalog/presence.js';

export { type AgentBrief, agentBriefWire, toAgentBriefWire } from './event-catalog/conversations.js';
export type { Audience, EventDeclaration } from './event-catalog/declaration.js';
export {
  type AttachmentView,
  attachmentWire,
  type MessageView,
  messageWire,
  toAttachmentWire,
  toMessageWire,
} from './event-catalog/messages.js';
export { type NoteView, noteWire, toNoteWire } from './event-catalog/notes.js';

// The order of the subjects is the order of eventNames (the GraphQL description, the docs' table).
export const eventCatalog = {
  ...presenceEvents,
  ...messageEvents,
  ...conversationEvents,
  ...noteEvents,
  ...availabilityEvents,
  ...integrationEvents,
  ...channelEvents,
} as const;

export type EventName = keyof typeof eventCatalog;
/** What the domain passes to publish an event (camelCase). */
export type EventData<N extends EventName> = Parameters<(typeof eventCatalog)[N]['toWire']>[0];
/** What subscribers receive. */
export type EventWire<N extends EventName> = ReturnType<(typeof eventCatalog)[N]['toWire']>;

export const eventNames = Object.keys(eventCatalog) as EventName[];

/** Events a webhook endpoint may subscribe to, each with its payload version. */
export const webhookEventNames = eventNames.filter(
  (n) => (eventCatalog[n] as EventDeclaration<unknown, unknown>).webhook !== undefined,
);
export type WebhookEventName =
  | 'message.created'
  | 'conversation.created'
  | 'conversation.assigned'
  | 'conversation.transferred'
  | 'conversation.closed'
  | 'conversation.rated'
  | 'conversation.handed_off'
  | 'conversation.message_left'
  | 'visitor.created'
  | 'webhook.test';

/** Names the gateway owns: POST /internal/events may not publish them. */
export const isReservedEventName = (name: string) => Object.hasOwn(eventCatalog, name);

/** The wire payload of an event (what a subscriber receives, what the outbox stores). */
export function toWire<N extends EventName>(name: N, data: EventData<N>): EventWire<N> {
  const declaration = eventCatalog[name] as unknown as EventDeclaration<EventData<N>, EventWire<N>>;
  return declaration.toWire(data);
}
