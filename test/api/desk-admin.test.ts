import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

describe('Demo data — the demo admin', () => {
  it('ada / ada-password logs in to the demo merchant as level admin', async () => {
    const client = new HttpClient(t.url);
    const { body } = await client.login('ada');
    expect(body).toMatchObject({ code: 0, data: { redirect: '/agent/' } });
    const { body: me } = await client.graphql('{ currentAgent { id agentId nickname level avatar } }');
    expect(me).toEqual({
      data: {
        currentAgent: {
          id: 'a_ada',
          agentId: 'a_ada',
          nickname: 'Ada',
          level: 'admin',
          avatar: '/assets/avatar-ada.svg',
        },
      },
    });
    const { body: workbench } = await client.json('/agent/data/get');
    expect(workbench.data.setting.bid).toBe('demo');
  });
});
