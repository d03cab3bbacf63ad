// @ts-check
import { byId, callJson, captchaControl, say } from '/assets/api.js';

const form = byId('login-form', HTMLFormElement);
const error = byId('login-error');
const submit = byId('login-submit', HTMLButtonElement);
const captchaInput = byId('captcha', HTMLInputElement);
const captcha = captchaControl({
  image: byId('captcha-image', HTMLImageElement),
  button: byId('captcha-reload'),
  input: captchaInput,
  endpoint: '/agent/login/logincaptcha',
});

// Only paths of the agent area are followed after login, never another site.
const safeRedirect = (/** @type {unknown} */ path) =>
  typeof path === 'string' && /^\/agent\/[\w/-]*$/.test(path) ? path : '/agent/';

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const fields = new FormData(form);
  const missing = ['username', 'password', 'captcha'].find((name) => !String(fields.get(name) ?? '').trim());
  if (missing) {
    say(error, `Please enter the ${missing}.`);
    byId(missing).focus();
    return;
  }
  submit.disabled = true;
  say(error, '');
  try {
    const { body } = await callJson('/agent/login/check', {
      method: 'POST',
      form: {
        username: String(fields.get('username')),
        password: String(fields.get('password')),
        captcha: String(fields.get('captcha')),
      },
    });
    if (body.code === 0) {
      location.assign(safeRedirect(body.data?.redirect));
      return;
    }
    say(error, body.msg || 'Login failed.');
  } catch {
    say(error, 'The server could not be reached. Check your connection and try again.');
  }
  // Spec: after a failed submit the captcha is cleared and a new image loaded (the old one is used up).
  captcha.reset();
  captchaInput.focus();
  submit.disabled = false;
});
