import { type DocumentNode, getOperationAST, Kind, type SelectionSetNode } from 'graphql';
import type { ChannelEvent } from '../stores/bus.js';
import { globalEventId } from '../stores/event-id.js';

/**
 * A `channel` subscription's selection built without GraphQL execution, for what nearly every
 * client asks (`channel(name:…){ id channel event data at }`, with aliases or in another order):
 * plain reads of the event, where graphql-js's `executeSync` coerces the variables, collects the
 * fields and completes each value for every event (about 4 % of the message path's CPU,
 * BENCHMARKS.md, issue 33). The result is the one execution gives, byte for byte once serialised:
 * the same keys in the same order (objects without a prototype, as graphql-js makes them), the
 * same values as the fields' resolvers in src/schema/channel.ts.
 *
 * Only selections of those fields (aliases allowed) qualify: a fragment, a directive, an argument,
 * a repeated response key or another field (`payload`) makes `compileChannelSelection` answer
 * undefined, and the caller executes. A built payload answers undefined too when a value is not
 * what the non-null String and JSON fields return as is (a missing or non-string value, where
 * execution would coerce it or answer an error): the caller then executes that event.
 */
export type ChannelSelection = (event: ChannelEvent) => object | undefined;

/** ChannelEvent's fields that read the event as they are; src/schema/channel.ts resolves them so. */
const FIELDS: Record<string, (event: ChannelEvent) => unknown> = {
  id: (event) => globalEventId(event),
  position: (event) => event.id,
  channel: (event) => event.channel,
  event: (event) => event.event,
  data: (event) => event.data,
  at: (event) => event.at,
  __typename: () => 'ChannelEvent',
};

export function compileChannelSelection(
  document: DocumentNode,
  operationName: string | null | undefined,
): ChannelSelection | undefined {
  const operation = getOperationAST(document, operationName);
  if (operation?.operation !== 'subscription' || (operation.directives?.length ?? 0) > 0) return undefined;
  const roots = operation.selectionSet.selections;
  const root = roots[0];
  if (roots.length !== 1 || root?.kind !== Kind.FIELD || root.name.value !== 'channel') return undefined;
  if ((root.directives?.length ?? 0) > 0 || !root.selectionSet) return undefined;
  const fields = plainFields(root.selectionSet);
  if (!fields) return undefined;
  const rootKey = root.alias?.value ?? 'channel';
  return (event) => {
    const selected = Object.create(null) as Record<string, unknown>;
    for (const [key, read] of fields) {
      const value = read(event);
      // `data` is JSON (any value but null); every other field a String.
      if (value === undefined || value === null || (read !== FIELDS.data && typeof value !== 'string'))
        return undefined;
      selected[key] = value;
    }
    const data = Object.create(null) as Record<string, unknown>;
    data[rootKey] = selected;
    return { data };
  };
}

/** The selection's (response key, read) pairs in order, or undefined when one is not a plain field. */
function plainFields(set: SelectionSetNode): [string, (event: ChannelEvent) => unknown][] | undefined {
  const fields: [string, (event: ChannelEvent) => unknown][] = [];
  const keys = new Set<string>();
  for (const selection of set.selections) {
    if (selection.kind !== Kind.FIELD || selection.selectionSet) return undefined;
    if ((selection.directives?.length ?? 0) > 0 || (selection.arguments?.length ?? 0) > 0) return undefined;
    const read = Object.hasOwn(FIELDS, selection.name.value) ? FIELDS[selection.name.value] : undefined;
    const key = selection.alias?.value ?? selection.name.value;
    if (!read || keys.has(key)) return undefined;
    keys.add(key);
    fields.push([key, read]);
  }
  return fields.length > 0 ? fields : undefined;
}
