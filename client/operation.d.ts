/**
 * @param {import('graphql').DocumentNode | string} document
 * @param {Record<string, unknown> | undefined} variables
 * @param {string} [operationName]
 * @returns {ChannelOperation | undefined} undefined when the operation is not a subscription to `channel`.
 */
export function channelOperation(document: import("graphql").DocumentNode | string, variables: Record<string, unknown> | undefined, operationName?: string): ChannelOperation | undefined;
export type ChannelOperation = import("./index.js").ChannelOperation;
