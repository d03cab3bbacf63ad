import { GraphQLError, parse, subscribe } from 'graphql';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';
import { typedPayload } from '../../src/schema/event-payloads.js';
import { schema } from '../../src/schema/index.js';
import { toGraphQLError } from '../../src/schema/yoga.js';
import type { ChannelEvent } from '../../src/stores/bus.js';

// Parts of the GraphQL adapter checked without a server: the camelizing of event payloads, the
// formatting of errors (toGraphQLError) and the channel resolver on a context without sockets.

// Event payloads: the wire data of an event (snake_case) camelized for GraphQL through its catalog schema, nested
// nullable objects included: a key left in snake_case would resolve to null in the answer.

const event = (name: string, data: unknown) => ({ id: '1-0', event: name, data }) as unknown as ChannelEvent;

describe('event payloads: the camelizing of wire data', () => {
  it('camelizes a nullable nested object, and keeps a null one null', () => {
    const to = { agent_id: 'a-2', nickname: 'Bob', avatar: 'https://x/b.png' };
    const moved = typedPayload(event('conversation.transferred', { to })) as { to: unknown };
    expect(moved.to).toEqual({ agentId: 'a-2', nickname: 'Bob', avatar: 'https://x/b.png' });
    expect((typedPayload(event('conversation.transferred', { to: null })) as { to: unknown }).to).toBeNull();
  });

  it('camelizes the attachment inside a message, and a message without one keeps attachment null', () => {
    const attachment = {
      attachment_id: 'att-1',
      kind: 'image',
      mime: 'image/png',
      size: 12,
      name: 'a.png',
      url: '/u',
      thumbnail_url: '/t',
    };
    const withFile = typedPayload(event('message.created', { message: { attachment } })) as {
      message: { attachment: unknown };
    };
    expect(withFile.message.attachment).toEqual({
      attachmentId: 'att-1',
      kind: 'image',
      mime: 'image/png',
      size: 12,
      name: 'a.png',
      url: '/u',
      thumbnailUrl: '/t',
    });
    const text = typedPayload(event('message.created', { message: { attachment: null } })) as {
      message: { attachment: unknown };
    };
    expect(text.message.attachment).toBeNull();
  });

  it('keeps the items of an array field (session.ended lists the ended Sessions)', () => {
    const ended = typedPayload(event('session.ended', { sessions: ['s-1', 's-2'] })) as { sessions: unknown };
    expect(ended.sessions).toEqual(['s-1', 's-2']);
  });

  it('an event the catalog does not type (POST /internal/events) has no typed payload', () => {
    expect(typedPayload(event('shop.custom_thing', { some_key: 1 }))).toBeNull();
  });
});

describe('toGraphQLError', () => {
  const deps = () => {
    const logged: unknown[][] = [];
    return { logged, deps: { log: { error: (...args: unknown[]) => logged.push(args) } } as unknown as Deps };
  };
  const shape = (e: GraphQLError) => ({ message: e.message, path: e.path, extensions: e.extensions });

  it('a domain error keeps its message and code, with retryAfter when limited, and is not logged', () => {
    const { logged, deps: d } = deps();
    const limited = new GraphQLError('x', {
      path: ['send'],
      originalError: new DomainError('RATE_LIMITED', 'Too many', 7),
    });
    expect(shape(toGraphQLError(limited, d))).toEqual({
      message: 'Too many',
      path: ['send'],
      extensions: { code: 'RATE_LIMITED', retryAfter: 7 },
    });
    expect(shape(toGraphQLError(new DomainError('FORBIDDEN', 'No'), d))).toEqual({
      message: 'No',
      path: undefined,
      extensions: { code: 'FORBIDDEN' },
    });
    expect(logged).toEqual([]);
  });

  it('anything else is masked as INTERNAL_SERVER_ERROR and logged once', () => {
    const { logged, deps: d } = deps();
    const failure = new TypeError('secret detail');
    const masked = toGraphQLError(new GraphQLError('secret detail', { path: ['a'], originalError: failure }), d);
    expect(shape(masked)).toEqual({
      message: 'Internal error',
      path: ['a'],
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    expect(masked.originalError).toBe(failure);
    expect(logged.map(([, msg]) => msg)).toEqual(['graphql resolver failed']);
  });

  it('graphql-js’s own error keeps its message and code, or gets BAD_USER_INPUT', () => {
    const { logged, deps: d } = deps();
    const coded = new GraphQLError('Bad depth', { extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } });
    expect(toGraphQLError(coded, d)).toBe(coded);
    const plain = toGraphQLError(new GraphQLError('Bad variable', { path: ['q'], extensions: { hint: 1 } }), d);
    expect(shape(plain)).toEqual({
      message: 'Bad variable',
      path: ['q'],
      extensions: { hint: 1, code: 'BAD_USER_INPUT' },
    });
    expect(logged).toEqual([]);
  });
});

describe('the channel field without a socket', () => {
  it('a subscription resolved on a context without openChannel is refused: served over WebSocket only', async () => {
    const name = 'visitor-channel-1';
    const contextValue = { identity: 'visitor', visitor: async () => ({ kind: 'visitor', channel: name }) };
    const result = await subscribe({
      schema,
      document: parse(`subscription { channel(name: "${name}") { id } }`),
      contextValue,
    });
    const errors = (result as { errors?: readonly GraphQLError[] }).errors ?? [];
    expect(errors.map((e) => e.message)).toEqual(['Subscriptions are served over WebSocket only']);
    expect(errors[0]?.originalError).toMatchObject({ code: 'BAD_USER_INPUT' });
  });
});
