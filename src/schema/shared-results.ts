import {
  createSourceEventStream,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  execute,
  Kind,
  type OperationDefinitionNode,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';

/**
 * Fan-out without per-subscriber execution. Every subscriber of a channel on this instance
 * receives the very same event object from the bus, and a `channel` subscription's result
 * depends only on that event, the document and the variables (ChannelEvent has scalar fields
 * only: no resolver reads the context). So each distinct (event, document, variables) is
 * executed once and the result object is shared by every subscriber that asked the same.
 * Other subscriptions are executed as usual.
 */
export function sharedChannelResults(): Plugin {
  const documentIds = new WeakMap<DocumentNode, number>();
  let nextDocumentId = 0;
  const results = new WeakMap<object, Map<string, ExecutionResult | Promise<ExecutionResult>>>();

  return {
    onSubscribe({ args, setSubscribeFn }) {
      if (!isChannelSubscription(args.document, args.operationName)) return;
      setSubscribeFn(async (subscribeArgs: ExecutionArgs) => {
        const source = await createSourceEventStream(subscribeArgs);
        if (!isAsyncIterable(source)) return source as ExecutionResult;
        let id = documentIds.get(subscribeArgs.document);
        if (id === undefined) {
          id = nextDocumentId++;
          documentIds.set(subscribeArgs.document, id);
        }
        const key = `${id}:${JSON.stringify(subscribeArgs.variableValues ?? {})}`;
        return mapAsyncIterable(source, (event) => {
          if (typeof event !== 'object' || event === null) return execute({ ...subscribeArgs, rootValue: event });
          let byKey = results.get(event);
          if (!byKey) {
            byKey = new Map();
            results.set(event, byKey);
          }
          let result = byKey.get(key);
          if (!result) {
            result = execute({ ...subscribeArgs, rootValue: event });
            byKey.set(key, result);
          }
          return result;
        });
      });
    },
  };
}

/** A single-operation document whose only root field is `channel` (aliases allowed). */
function isChannelSubscription(document: DocumentNode, operationName?: string | null): boolean {
  const operations = document.definitions.filter(
    (d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION,
  );
  const operation = operationName ? operations.find((o) => o.name?.value === operationName) : operations[0];
  if (operation?.operation !== 'subscription') return false;
  const { selections } = operation.selectionSet;
  return selections.length === 1 && selections[0]?.kind === Kind.FIELD && selections[0].name.value === 'channel';
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

/** `source` mapped through `map`, passing `return` (unsubscribe) through to the source. */
function mapAsyncIterable<T, U>(source: AsyncIterable<T>, map: (value: T) => U | Promise<U>): AsyncGenerator<U> {
  const iterator = source[Symbol.asyncIterator]();
  const mapped: AsyncGenerator<U> = {
    async next() {
      const step = await iterator.next();
      return step.done ? { done: true, value: undefined } : { done: false, value: await map(step.value) };
    },
    async return() {
      await iterator.return?.();
      return { done: true, value: undefined };
    },
    async throw(error) {
      if (iterator.throw) await iterator.throw(error);
      throw error;
    },
    [Symbol.asyncIterator]() {
      return mapped;
    },
  };
  return mapped;
}
