import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { type ExecutionResult, print } from 'graphql';
import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';

/**
 * A minimal typed GraphQL client over fetch and graphql-ws: every call takes a generated
 * TypedDocumentNode, so variables and results are checked by the compiler. Real apps would use
 * urql, Apollo or graphql-request the same way (they all accept TypedDocumentNode).
 */

export class GraphQLRequestError extends Error {
  constructor(
    readonly errors: ReadonlyArray<{ message: string; extensions?: Record<string, unknown> }>,
    readonly status: number,
  ) {
    super(errors.map((e) => `${e.extensions?.code ?? 'ERROR'}: ${e.message}`).join('; '));
  }
}

export interface HttpOptions {
  /** Headers of every request: `token` (agent Session) or `authorization` (visitor bearer). */
  headers?: Record<string, string>;
  /** Cookie header to send (the Session cookie a captcha fetch set), for the login mutation. */
  cookie?: string;
}

/** Runs a query or mutation on `${base}/graphql` and returns its typed `data`, or throws its errors. */
export async function request<TResult, TVariables extends Record<string, unknown>>(
  base: string,
  document: TypedDocumentNode<TResult, TVariables>,
  variables: TVariables,
  options: HttpOptions = {},
): Promise<TResult> {
  const res = await fetch(new URL('/graphql', base), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...(options.cookie ? { cookie: options.cookie } : {}),
      ...options.headers,
    },
    body: JSON.stringify({ query: print(document), variables }),
  });
  const body = (await res.json()) as ExecutionResult<TResult>;
  if (body.errors?.length || !body.data) throw new GraphQLRequestError(body.errors ?? [], res.status);
  return body.data;
}

/** A graphql-ws connection with `connectionParams` (appkey plus `token` or `authorization`). */
export function connect(wsAddress: string, connectionParams: Record<string, string>): Client {
  return createClient({ url: wsAddress, webSocketImpl: WebSocket, connectionParams, retryAttempts: 0, lazy: true });
}

/** The typed results of a subscription, as an async iterator (break out of the loop to unsubscribe). */
export async function* subscribe<TResult, TVariables extends Record<string, unknown>>(
  client: Client,
  document: TypedDocumentNode<TResult, TVariables>,
  variables: TVariables,
): AsyncGenerator<TResult> {
  const iterator = client.iterate<TResult>({ query: print(document), variables });
  for await (const result of iterator) {
    if (result.errors?.length || !result.data) throw new GraphQLRequestError(result.errors ?? [], 200);
    yield result.data;
  }
}
