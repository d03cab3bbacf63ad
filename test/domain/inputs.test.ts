import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DomainError } from '../../src/errors.js';
import {
  channelName,
  displayName,
  eventId,
  languageTag,
  loginInput,
  parseInput,
  publishEventInput,
  required,
  smsCaptchaInput,
  smsVerifyInput,
  text,
  UNSAFE_IN_NAMES,
} from '../../src/resolvers/inputs.js';
import { visitorTokenInput } from '../../src/resolvers/visitor.js';

/** The BAD_USER_INPUT message parseInput gives for `raw`, or 'ok'. */
function refusal(schema: z.ZodTypeAny, raw: unknown): string {
  try {
    parseInput(schema, raw);
    return 'ok';
  } catch (error) {
    if (error instanceof DomainError && error.code === 'BAD_USER_INPUT') return error.message;
    throw error;
  }
}
/**
 * A checker of one field: the schema is built at each call, inside the test, so a mutant of the
 * builder (`text`, `required`…) is live while the test runs (Stryker's per-test coverage).
 */
const field = (schema: () => z.ZodTypeAny) => (value: unknown) => refusal(z.object({ f: schema() }), { f: value });

describe('Strings (text)', () => {
  const t = field(() => text(5));
  it('takes a single well-formed string up to its length, empty included', () => {
    expect(t('')).toBe('ok');
    expect(t('abcde')).toBe('ok');
    expect(t('a\tb\nc')).toBe('ok');
    expect(t('a\r\n')).toBe('ok');
    expect(t('😀ab')).toBe('ok');
  });
  it('refuses too long, a non-string, control characters and broken UTF-16, naming the rule', () => {
    expect(t('abcdef')).toBe('f must be at most 5 characters');
    expect(t(['a'])).toBe('f must be a single string');
    expect(t(5)).toBe('f must be a single string');
    for (const c of ['\u0000', '\u0008', '\u000b', '\u000c', '\u000e', '\u001f', '\u007f'])
      expect(t(`a${c}b`)).toBe('f must not contain control characters');
    expect(t('a\ud800b')).toBe('f must be valid Unicode text');
    expect(t('a\udc00')).toBe('f must be valid Unicode text');
    expect(t('\ud800')).toBe('f must be valid Unicode text');
  });
  it('a missing field is required', () => {
    expect(refusal(z.object({ f: text(5) }), {})).toBe('f is required');
  });
});

describe('Required strings (required)', () => {
  const r = field(() => required(5));
  it('takes any string with a non-space character', () => {
    expect(r('a')).toBe('ok');
    expect(r(' a ')).toBe('ok');
    expect(r('\ta\n')).toBe('ok');
  });
  it('refuses empty, blank, too long, control characters and broken UTF-16', () => {
    expect(r('')).toBe('f is required');
    expect(r('   ')).toBe('f is required');
    expect(r('\t\n')).toBe('f is required');
    expect(r('abcdef')).toBe('f must be at most 5 characters');
    expect(r('a\u0001')).toBe('f must not contain control characters');
    expect(r('\u0001')).toBe('f must not contain control characters');
    expect(r('a\u007fb')).toBe('f must not contain control characters');
    expect(r('a\ud800')).toBe('f must be valid Unicode text');
    expect(r(null)).toBe('f must be a single string');
  });
});

describe('Display names (displayName)', () => {
  const d = field(() => displayName(10));
  it('takes one line of text', () => {
    expect(d('Lily 王')).toBe('ok');
  });
  it('refuses line breaks, tabs and bidirectional controls', () => {
    for (const c of [
      '\t',
      '\n',
      '\r',
      '\u0085',
      '\u009f',
      '\u061c',
      '\u200e',
      '\u200f',
      '\u202a',
      '\u202e',
      '\u2066',
      '\u2069',
    ])
      expect(d(`a${c}b`)).toBe('f must not contain control or bidirectional characters');
    expect(d('\u00a0ok')).toBe('ok');
    expect(d('\u2067x')).toBe('f must not contain control or bidirectional characters');
  });
  it('the same characters are what UNSAFE_IN_NAMES strips, everywhere in a string', () => {
    expect('a\u202eb\u0007c\u2066'.replace(UNSAFE_IN_NAMES, '')).toBe('abc');
    // A global pattern used with .test() keeps state; displayName must not: the same name twice gives the same answer.
    expect(d('a\u202eb')).toBe(d('a\u202eb'));
  });
});

describe('Language tags', () => {
  const l = field(() => languageTag);
  it('takes en, zh-CN, sr-Latn-RS', () => {
    for (const tag of ['en', 'zh-CN', 'sr-Latn-RS', 'yue', 'de-CH-1996']) expect(l(tag)).toBe('ok');
  });
  it('refuses anything else', () => {
    for (const tag of ['e', 'english', 'en_US', 'en-', '-en', 'en-a', 'en-toolongsub', 'a1'])
      expect(l(tag)).toBe('f must be a language code such as en or zh-CN');
    expect(l(`en${'-abcd'.repeat(7)}`)).toBe('f must be at most 35 characters');
    expect(l(['en'])).toBe('f must be a single string');
  });
});

describe('The contracts of the operations', () => {
  it('login: username, password and captcha required; cid optional', () => {
    expect(parseInput(loginInput, { username: 'alice', password: 'pw', captcha: 'ab12' })).toEqual({
      username: 'alice',
      password: 'pw',
      captcha: 'ab12',
    });
    expect(refusal(loginInput, { password: 'pw', captcha: 'ab12' })).toBe('username is required');
    expect(refusal(loginInput, { username: 'alice', password: ' ', captcha: 'ab12' })).toBe('password is required');
    expect(refusal(loginInput, { username: 'alice', password: 'pw' })).toBe('captcha is required');
    expect(refusal(loginInput, { username: 'a'.repeat(65), password: 'pw', captcha: 'c' })).toBe(
      'username must be at most 64 characters',
    );
    expect(refusal(loginInput, { username: 'a', password: 'p'.repeat(257), captcha: 'c' })).toBe(
      'password must be at most 256 characters',
    );
    expect(refusal(loginInput, { username: 'a', password: 'p', captcha: 'c'.repeat(17) })).toBe(
      'captcha must be at most 16 characters',
    );
    expect(refusal(loginInput, { username: 'a', password: 'p', captcha: 'c', cid: 'x'.repeat(129) })).toBe(
      'cid must be at most 128 characters',
    );
    expect(parseInput(loginInput, { username: 'a', password: 'p', captcha: 'c', cid: '' }).cid).toBe('');
  });

  it('SMS: mobile and captcha, mobile and a code of at most 6', () => {
    expect(refusal(smsCaptchaInput, { mobile: '13912345678', captcha: 'ab12' })).toBe('ok');
    expect(refusal(smsCaptchaInput, { mobile: '1'.repeat(21), captcha: 'ab12' })).toBe(
      'mobile must be at most 20 characters',
    );
    expect(refusal(smsCaptchaInput, { mobile: '13912345678' })).toBe('captcha is required');
    expect(refusal(smsVerifyInput, { mobile: '13912345678', code: '123456' })).toBe('ok');
    expect(refusal(smsVerifyInput, { mobile: '13912345678', code: '1234567' })).toBe(
      'code must be at most 6 characters',
    );
    expect(refusal(smsVerifyInput, { mobile: '13912345678', code: '' })).toBe('code is required');
  });

  it('visitor token: the domain’s camelCase fields and their rules', () => {
    expect(
      parseInput(visitorTokenInput, {
        appkey: 'key',
        userId: 'u1',
        userHash: 'h',
        nickname: 'Lily',
        lang: 'zh-CN',
      }),
    ).toEqual({ appkey: 'key', userId: 'u1', userHash: 'h', nickname: 'Lily', lang: 'zh-CN' });
    expect(parseInput(visitorTokenInput, { appkey: 'key' })).toEqual({ appkey: 'key' });
    expect(refusal(visitorTokenInput, {})).toBe('appkey is required');
    expect(refusal(visitorTokenInput, { appkey: 'k'.repeat(129) })).toBe('appkey must be at most 128 characters');
    expect(refusal(visitorTokenInput, { appkey: 'k', userId: 'u'.repeat(129) })).toBe(
      'userId must be at most 128 characters',
    );
    expect(refusal(visitorTokenInput, { appkey: 'k', userHash: 'h'.repeat(129) })).toBe(
      'userHash must be at most 128 characters',
    );
    expect(refusal(visitorTokenInput, { appkey: 'k', nickname: 'a\u202eb' })).toBe(
      'nickname must not contain control or bidirectional characters',
    );
    expect(refusal(visitorTokenInput, { appkey: 'k', nickname: 'n'.repeat(65) })).toBe(
      'nickname must be at most 64 characters',
    );
    expect(refusal(visitorTokenInput, { appkey: 'k', lang: 'english' })).toBe(
      'lang must be a language code such as en or zh-CN',
    );
  });

  it('channels, event ids and published events', () => {
    expect(field(() => channelName)('global-demo')).toBe('ok');
    expect(field(() => channelName)('c'.repeat(201))).toBe('f must be at most 200 characters');
    expect(field(() => channelName)(' ')).toBe('f is required');
    expect(field(() => eventId)('1700000000000-0')).toBe('ok');
    for (const bad of ['1700000000000', '-0', '1-', 'a-0', '1-0-0', '12345678901234567-0', '1-12345678901234567'])
      expect(field(() => eventId)(bad)).toBe('f must be an event id such as 1700000000000-0');
    const event = (e: Record<string, unknown>) =>
      refusal(publishEventInput, { channel: 'c', event: 'x.y', data: 1, ...e });
    expect(event({})).toBe('ok');
    expect(event({ event: 'A_b.c:d-1' })).toBe('ok');
    expect(event({ event: 'e'.repeat(64) })).toBe('ok');
    for (const bad of ['', 'e'.repeat(65), 'a b', 'a/b'])
      expect(event({ event: bad })).toBe('event must be 1-64 letters, digits or _ . : -');
    expect(event({ event: 5 })).toBe('event must be a single string');
    expect(event({ data: undefined })).toBe('data is required');
    expect(event({ data: null })).toBe('ok');
    expect(event({ data: false })).toBe('ok');
  });

  it('parseInput names the first bad field, "input" for the whole; no input is an empty object', () => {
    expect(refusal(z.object({ a: z.object({ b: z.string() }) }), { a: { b: 1 } })).toBe(
      'a.b Expected string, received number',
    );
    expect(refusal(z.string(), 5)).toBe('input Expected string, received number');
    expect(refusal(z.object({ a: z.string() }), undefined)).toBe('a is required');
    expect(refusal(z.object({ a: z.string() }), null)).toBe('a is required');
    expect(refusal(z.object({}).strict(), { x: 1 })).toMatch(/^input /);
    expect(parseInput(z.object({ a: z.string().default('d') }), undefined)).toEqual({ a: 'd' });
  });
});
