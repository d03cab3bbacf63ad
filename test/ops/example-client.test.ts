import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENERATED_FILE, generateTypedDocuments } from '../../examples/typed-client/codegen.js';
import { CAPTCHA, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

interface ReceivedEvent {
  channel: string;
  event: string;
  data: unknown;
}
interface ExampleSummary {
  visitor: { uid: string; channel: string; imageMaxBytes: number };
  agent: { agentId: string; bid: string; conversations: number };
  received: { visitor: ReceivedEvent; agent: ReceivedEvent };
}

/**
 * The typed example client (examples/typed-client) against the real server. CI also compiles it
 * with tsc and runs the compiled client against a separately started gateway (npm run example:ci).
 */
describe('typed example client (GraphQL Code Generator typed documents)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.stop());

  it('its operations validate against schema.graphql and generate typed documents', async () => {
    const source = await generateTypedDocuments();
    for (const name of ['VisitorBootstrapDocument', 'AgentWorkbenchDocument', 'ChannelDocument']) {
      expect(source).toContain(`export const ${name} =`);
    }
    expect(source).toMatch(/DocumentNode<ChannelSubscription, ChannelSubscriptionVariables>/);
    mkdirSync(dirname(GENERATED_FILE), { recursive: true });
    writeFileSync(GENERATED_FILE, source);
  });

  it('bootstraps a visitor and an agent, subscribes over graphql-ws and receives a published event on both', async () => {
    // Imported by URL: its generated module exists only once the test above (or CI's codegen) ran.
    const { runExample } = (await import(pathToFileURL('examples/typed-client/src/main.ts').href)) as {
      runExample(options: Record<string, string>): Promise<ExampleSummary>;
    };
    const summary = await runExample({
      base: t.url,
      appkey: 'demo-appkey',
      username: 'alice',
      password: 'alice-password',
      captcha: CAPTCHA,
      internalToken: INTERNAL_TOKEN,
    });
    expect(summary.agent).toEqual({ agentId: 'a_alice', bid: 'demo', conversations: 2 });
    expect(summary.visitor.imageMaxBytes).toBe(20971520);
    expect(summary.received.visitor.channel).toBe(summary.visitor.channel);
    expect(summary.received.agent.channel).toBe('agent-a_alice');
    expect(summary.received.agent.data).toEqual({ from: 'typed example' });
  });
});
