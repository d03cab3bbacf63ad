import { type DocumentNode, type ExecutionArgs, executeSync } from 'graphql';
import type { Deps } from '../deps.js';
import { toGraphQLError } from '../schema/yoga.js';
import { compileChannelSelection } from './channel-selection.js';
import type { ChannelSubscription, Fanout, FanoutSocket, FrameFormat, SubscriptionOwner } from './fanout.js';

/** Documents numbered once, so a format's key is short and stable: (document, operation, variables). */
export function documentFormatKeys(): (args: ExecutionArgs) => string {
  const documentIds = new WeakMap<DocumentNode, number>();
  let documents = 0;
  return ({ document, operationName, variableValues }) => {
    let n = documentIds.get(document);
    if (n === undefined) {
      n = ++documents;
      documentIds.set(document, n);
    }
    return `graphql:${n}:${operationName ?? ''}:${JSON.stringify(variableValues ?? {})}`;
  };
}

/**
 * A `channel` selection made once per event for every operation asking the same: built from the
 * event when it selects only plain fields (channel-selection.ts), else executed.
 */
export function graphqlFormat(key: string, args: ExecutionArgs, deps: Deps): FrameFormat {
  const { schema, document, operationName, variableValues } = args;
  const built = compileChannelSelection(document, operationName);
  return {
    key,
    payload(event) {
      const plain = built?.(event);
      if (plain) return JSON.stringify(plain);
      // ChannelEvent's fields are plain reads of the event: no resolver reads the context.
      const result = executeSync({ schema, document, operationName, variableValues, rootValue: event });
      return JSON.stringify(
        result.errors ? { ...result, errors: result.errors.map((error) => toGraphQLError(error, deps)) } : result,
      );
    },
  };
}

const DONE: IteratorResult<never> = { done: true, value: undefined };

/**
 * What graphql-ws holds for a subscription delivered by the fan-out: an iterator that yields
 * nothing and finishes when the subscription ends — the fan-out ended it (`ended`), or the client
 * completed it or left (`return`). Its end releases the operation's slot in the caps.
 */
export class OperationHandle implements AsyncIterableIterator<never>, SubscriptionOwner {
  subscription?: ChannelSubscription;
  private done = false;
  private finish?: (result: IteratorResult<never>) => void;

  constructor(
    private readonly to: FanoutSocket,
    private readonly id: string,
    private readonly release: (() => void) | undefined,
    private readonly deps: Deps,
    private readonly fanout: Fanout,
  ) {}

  next(): Promise<IteratorResult<never>> {
    if (this.done) return Promise.resolve(DONE);
    return new Promise((resolve) => {
      this.finish = resolve;
    });
  }

  return(): Promise<IteratorResult<never>> {
    if (this.subscription) this.fanout.end(this.subscription);
    else this.ended();
    return Promise.resolve(DONE);
  }

  throw(): Promise<IteratorResult<never>> {
    return this.return();
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  ended(error?: unknown) {
    if (this.done) return;
    this.done = true;
    this.release?.();
    if (error !== undefined) {
      const { socket } = this.to;
      const masked = toGraphQLError(error, this.deps);
      if (socket.readyState === socket.OPEN) {
        socket.send(JSON.stringify({ id: this.id, type: 'next', payload: { errors: [masked] } }));
      }
    }
    this.finish?.(DONE);
  }
}
