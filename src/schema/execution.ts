import { execute } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/**
 * Queries and mutations run on graphql-js's own `execute`, not on yoga's default executor
 * (`@graphql-tools/executor`'s `normalizedExecutor`). That executor exists for what this schema
 * does not serve (`@defer`/`@stream`, subscriptions over HTTP: sockets only here) and pays for
 * it on every field with promise wrappers; graphql-js completes the same fields with the same
 * resolvers, scalars and errors (BENCHMARKS.md, issue 33 target 2). Placed first among our
 * plugins, so the others (the observability span) wrap it.
 */
export function graphqlJsExecution(): Plugin {
  return {
    onExecute({ setExecuteFn }) {
      setExecuteFn(execute);
    },
  };
}
