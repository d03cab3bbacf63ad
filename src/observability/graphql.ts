import { SpanKind } from '@opentelemetry/api';
import { type DocumentNode, type ExecutionResult, type GraphQLError, getOperationAST, Kind } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Deps } from '../deps.js';
import { classifyError, graphqlCodeOf } from '../errors.js';
import { inSpan } from './tracing.js';

/** An invalid document names no schema field we can trust: its metrics share one label. */
const INVALID = '(invalid)';

/**
 * GraphQL metrics (operations, errors) and, with OTEL_ENABLED, a span around each execution. A
 * yoga/envelop plugin, so HTTP and graphql-ws operations (which run through `yoga.getEnveloped`)
 * are both counted. Subscriptions do not run through envelop's subscribe: the WebSocket adapter
 * counts them and the fan-out their deliveries (src/subscriptions/ws.ts, fanout.ts).
 */
export function observabilityPlugin(deps: Pick<Deps, 'metrics' | 'config'>): Plugin {
  const { metrics } = deps;
  const tracing = deps.config.otelEnabled;
  const countErrors = (result: ExecutionResult, type: string, field: string) => {
    for (const error of result.errors ?? []) metrics.graphqlError(type, field, codeOf(error));
  };

  return {
    onParse() {
      return ({ result }) => {
        if (result instanceof Error) metrics.graphqlError('unknown', INVALID, 'GRAPHQL_PARSE_FAILED');
      };
    },
    onValidate() {
      return ({ valid }) => {
        if (!valid) metrics.graphqlError('unknown', INVALID, 'GRAPHQL_VALIDATION_FAILED');
      };
    },
    onExecute({ args, executeFn, setExecuteFn }) {
      const { type, field } = describeOperation(args.document, args.operationName);
      metrics.graphqlOperation(type, field);
      if (tracing) {
        setExecuteFn((executionArgs) =>
          inSpan(
            `graphql ${type} ${field}`,
            { 'graphql.operation.type': type, 'graphql.operation.field': field },
            async (span) => {
              const result = await executeFn(executionArgs);
              if ('errors' in result && result.errors?.length)
                span.setAttribute('graphql.error.count', result.errors.length);
              return result;
            },
            SpanKind.INTERNAL,
          ),
        );
      }
      return {
        onExecuteDone({ result }) {
          if (!isAsyncIterable(result)) countErrors(result, type, field);
        },
      };
    },
  };
}

/** The operation's type and first root field: both bounded by the schema, so safe as labels. */
export function describeOperation(document: DocumentNode, operationName?: string | null) {
  const operation = getOperationAST(document, operationName);
  if (!operation) return { type: 'unknown', field: INVALID };
  const first = operation.selectionSet.selections.find((s) => s.kind === Kind.FIELD);
  return { type: operation.operation as string, field: first?.kind === Kind.FIELD ? first.name.value : INVALID };
}

function codeOf(error: GraphQLError): string {
  const code = error.extensions?.code;
  if (typeof code === 'string') return code;
  return error.originalError ? graphqlCodeOf(classifyError(error.originalError).code) : 'GRAPHQL_ERROR';
}

const isAsyncIterable = <T>(value: unknown): value is AsyncIterable<T> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
