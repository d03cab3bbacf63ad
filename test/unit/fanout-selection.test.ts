import { executeSync, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/schema/index.js';
import type { ChannelEvent } from '../../src/stores/bus.js';
import type { EventId } from '../../src/stores/event-id.js';
import { compileChannelSelection } from '../../src/subscriptions/channel-selection.js';

/** What the fan-out sent for every event before: the selection executed on the event. */
const executed = (query: string, event: ChannelEvent, operationName?: string) =>
  JSON.stringify(
    executeSync({
      schema,
      document: parse(query),
      operationName,
      variableValues: { name: event.channel },
      rootValue: event,
    }),
  );

const event = (over: Partial<ChannelEvent> = {}): ChannelEvent => ({
  id: '1764201600000-7' as EventId,
  channel: 'agent-a_1',
  event: 'message.created',
  data: { message: { id: 'msg_1', content: 'héllo "quoted" \u2028 😀', seq: 3, meta: null, tags: [1, false] } },
  at: '2026-11-27T03:00:00.000Z',
  ...over,
});

describe('a channel selection built without execution (src/subscriptions/channel-selection.ts)', () => {
  const plain = [
    'subscription($name:String!){channel(name:$name){id channel event data at}}',
    'subscription S($name:String!,$since:String){c: channel(name:$name, since:$since){ when: at i: id position __typename data event channel }}',
    'query Q { __typename } subscription S($name:String!){channel(name:$name){position}}',
  ];
  const events = [
    event(),
    event({ event: 'subscribed', data: {} }),
    event({ event: 'history.gap', data: { missed: true } }),
    event({ data: 'a string' }),
    event({ data: 0 }),
    event({ data: false }),
    event({ data: [{ a: 1 }, null] }),
  ];

  it('serialises to the same bytes as executing the selection, for every plain selection and event', () => {
    for (const query of plain) {
      const operationName = query.includes('subscription S') ? 'S' : undefined;
      const built = compileChannelSelection(parse(query), operationName);
      expect(built, query).toBeDefined();
      for (const e of events) expect(JSON.stringify(built?.(e))).toBe(executed(query, e, operationName));
    }
  });

  it('leaves to execution what is not a plain read: fragments, directives, the typed payload, a repeated key', () => {
    for (const query of [
      'subscription($name:String!){channel(name:$name){...F}} fragment F on ChannelEvent { id }',
      'subscription($name:String!){channel(name:$name){... on ChannelEvent { id }}}',
      'subscription($name:String!,$x:Boolean!){channel(name:$name){id @include(if:$x) at}}',
      'subscription($name:String!){channel(name:$name){id payload { __typename }}}',
      'subscription($name:String!){channel(name:$name){id id}}',
      'subscription($name:String!){channel(name:$name){id: at id}}',
      'subscription($name:String!){channel(name:$name) @skip(if:false) {id}}',
      // Not one plain `channel` root of a subscription operation without directives.
      'query($name:String!){channel(name:$name){id}}',
      'subscription($name:String!) @live {channel(name:$name){id}}',
      'subscription($name:String!){channel(name:$name){id} again: channel(name:$name){id}}',
      'subscription($name:String!){...R} fragment R on Subscription { channel(name:$name){id} }',
      'subscription($name:String!){other(name:$name){id}}',
      'subscription($name:String!){channel(name:$name)}',
      // A field with an argument or a selection of its own.
      'subscription($name:String!){channel(name:$name){id(short:true) at}}',
      'subscription($name:String!){channel(name:$name){id data { x }}}',
    ])
      expect(compileChannelSelection(parse(query), undefined), query).toBeUndefined();
  });

  it('answers nothing for an event execution would coerce or refuse (a null or non-string value)', () => {
    const query = plain[0] as string;
    const built = compileChannelSelection(parse(query), undefined);
    const refused = [event({ data: null }), event({ data: undefined }), event({ at: undefined as unknown as string })];
    for (const odd of refused) {
      expect(built?.(odd)).toBeUndefined();
      expect(JSON.parse(executed(query, odd)).errors).toBeDefined();
    }
    // Coerced by execution (String of a number or a boolean): left to it too.
    const coerced = [event({ at: 1_700_000_000 as unknown as string }), event({ event: true as unknown as string })];
    for (const odd of coerced) {
      expect(built?.(odd)).toBeUndefined();
      expect(JSON.parse(executed(query, odd)).data.channel).toMatchObject({ at: expect.any(String) });
    }
  });
});
