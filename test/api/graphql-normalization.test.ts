import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

// Issue 32: every object type with an identity exposes `id`, so Apollo's and urql's normalized
// caches update after a mutation without type policies.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

const QUEUE = gql`
  query Queue {
    conversations(scope: queue, first: 100) {
      nodes { id conversationId visitorId state agent { id agentId } }
    }
  }
`;
const CLAIM = gql`
  mutation Claim($visitorId: String!) {
    claimConversation(visitorId: $visitorId) { id state agent { id agentId nickname } }
  }
`;

interface QueueData {
  conversations: { nodes: { id: string; visitorId: string; state: string }[] };
}

describe('identities are normalized by `id`', () => {
  it('a claim answered by the mutation updates the conversation a query cached, without a refetch or type policy', async () => {
    const { token: bearer } = await visitorToken(t.url);
    const visitor = new HttpClient(t.url);
    const boot = await visitor.json<{ visitor: { uid: string } }>('/visitor/data/get', {
      headers: { authorization: `Bearer ${bearer}` },
    });
    const visitorId = boot.body.data.visitor.uid;
    const assigned = await visitor.json<{ state: string; conversation_id: string }>('/visitor/chat/assign', {
      method: 'POST',
      form: {},
      headers: { authorization: `Bearer ${bearer}` },
    });
    expect(assigned.body.data.state).toBe('queued'); // nobody online in this test

    const { token } = await agentSession(t.url, 'alice');
    const apollo = new ApolloClient({
      cache: new InMemoryCache(),
      link: new HttpLink({ uri: `${t.url}/graphql`, headers: { token } }),
    });
    const { data: before } = await apollo.query<QueueData>({ query: QUEUE });
    const cached = before?.conversations.nodes.find((c) => c.visitorId === visitorId);
    expect(cached).toMatchObject({ id: assigned.body.data.conversation_id, state: 'queued', agent: null });

    await apollo.mutate({ mutation: CLAIM, variables: { visitorId } });
    // Read from the cache only: the conversation object the query holds was updated by id.
    const after = apollo.readQuery<QueueData>({ query: QUEUE });
    const updated = after?.conversations.nodes.find((c) => c.visitorId === visitorId);
    expect(updated).toMatchObject({ id: cached?.id, state: 'active', agent: { id: 'a_alice', agentId: 'a_alice' } });
    const normalized = apollo.cache.extract() as Record<string, { state?: string }>;
    expect(normalized[`Conversation:${cached?.id}`]).toMatchObject({ state: 'active' });
  });

  it('the visitor’s id is its uid', async () => {
    const { token: bearer } = await visitorToken(t.url);
    const headers = { authorization: `Bearer ${bearer}` };
    const { body } = await new HttpClient(t.url).graphql<{
      visitorBootstrap: { visitor: { id: string; uid: string } };
    }>('{ visitorBootstrap { visitor { id uid } } }', {}, headers);
    expect(body.errors).toBeUndefined();
    const { id, uid } = body.data?.visitorBootstrap.visitor ?? {};
    expect(id).toBe(uid);
  });
});
