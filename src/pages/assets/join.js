// @ts-check
import { byId, callJson, captchaControl, say } from '/assets/api.js';
import { CODES } from '/assets/contract.js';

const smsOn = document.body.dataset.smsRegistration === 'on';
const registrationOn = document.body.dataset.registration === 'on';
const form = byId('join-form', HTMLFormElement);
const error = byId('join-error');
const status = byId('join-status');
const mobile = byId('mobile', HTMLInputElement);
const smsCode = byId('sms-code', HTMLInputElement);
const sendButton = byId('sms-send', HTMLButtonElement);
const countdown = byId('sms-countdown');
const captchaInput = byId('captcha', HTMLInputElement);
const captcha = captchaControl({
  image: byId('captcha-image', HTMLImageElement),
  button: byId('captcha-reload'),
  input: captchaInput,
  endpoint: '/agent/login/joincaptcha',
});

/** Seconds to wait before another SMS may be asked for after a successful send. */
const RESEND_SECONDS = 60;
const MOBILE = /^1[3-9]\d{9}$/;

const field = (/** @type {string} */ id) => byId(id, HTMLInputElement).value.trim();

// SMS registration on: the captcha sends the SMS code, and the code proves the number.
byId('sms-fields').hidden = !smsOn;
byId('sms-code-fields').hidden = !smsOn;
mobile.required = smsOn;
smsCode.required = smsOn;
captchaInput.required = !smsOn;
if (!registrationOn) {
  byId('registration-off').hidden = false;
  byId('join-scope').hidden = true;
  byId('join-fields', HTMLFieldSetElement).disabled = true;
}

/** @type {ReturnType<typeof setInterval> | undefined} */
let timer;
/** Disables the send button for `seconds`, showing what is left. */
function startCountdown(/** @type {number} */ seconds) {
  clearInterval(timer);
  let left = Math.max(1, Math.ceil(seconds));
  const tick = () => {
    if (left <= 0) {
      clearInterval(timer);
      sendButton.disabled = false;
      sendButton.textContent = 'Send SMS code';
      countdown.textContent = '';
      return;
    }
    sendButton.disabled = true;
    sendButton.textContent = `Resend in ${left} s`;
    left -= 1;
  };
  tick();
  timer = setInterval(tick, 1000);
}

/**
 * How long the server asked us to wait: the Retry-After header, else a number in the message.
 * @param {Headers} headers
 * @param {string | undefined} msg
 */
function waitSeconds(headers, msg) {
  const header = Number(headers.get('Retry-After'));
  if (Number.isFinite(header) && header > 0) return header;
  const inMsg = Number(/(\d+)\s*(s|sec|second)/i.exec(msg ?? '')?.[1]);
  return Number.isFinite(inMsg) && inMsg > 0 ? inMsg : RESEND_SECONDS;
}

function checkMobile() {
  if (MOBILE.test(mobile.value.trim())) return true;
  say(error, 'Please enter a mainland-China mobile number: 11 digits starting with 13 to 19.');
  mobile.focus();
  return false;
}

sendButton.addEventListener('click', async () => {
  say(status, '');
  if (!checkMobile()) return;
  if (!captchaInput.value.trim()) {
    say(error, 'Please enter the captcha first: it is needed to send an SMS code.');
    captchaInput.focus();
    return;
  }
  say(error, '');
  sendButton.disabled = true;
  try {
    const { headers, body } = await callJson('/agent/login/smscaptcha', {
      method: 'POST',
      form: { mobile: mobile.value.trim(), captcha: captchaInput.value.trim() },
    });
    if (body.code === 0) {
      say(status, 'SMS code sent. It is valid for 5 minutes.');
      countdown.textContent = 'You can ask for another code when the countdown ends.';
      startCountdown(RESEND_SECONDS);
      smsCode.focus();
    } else if (body.code === CODES.RATE_LIMITED) {
      // Rate limited: show the server's message and hold the button for as long as it says.
      say(error, body.msg);
      countdown.textContent = 'Sending is paused for a while.';
      startCountdown(waitSeconds(headers, body.msg));
    } else {
      say(error, body.msg || 'The SMS code could not be sent.');
      sendButton.disabled = false;
    }
  } catch {
    say(error, 'The server could not be reached. Check your connection and try again.');
    sendButton.disabled = false;
  }
  // The graphic captcha is single-use: whatever happened, the next send needs a new one.
  captcha.reset();
});

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(status, '');
  for (const id of ['merchant-name', 'username', 'nickname']) {
    if (!field(id)) {
      say(error, 'Please fill in every field.');
      byId(id).focus();
      return;
    }
  }
  if (byId('password', HTMLInputElement).value.length < 8) {
    say(error, 'The password needs at least 8 characters.');
    byId('password').focus();
    return;
  }
  if (smsOn && !checkMobile()) return;
  if (smsOn && !/^\d{6}$/.test(smsCode.value.trim())) {
    say(error, 'Please enter the 6-digit SMS code.');
    smsCode.focus();
    return;
  }
  if (!smsOn && !captchaInput.value.trim()) {
    say(error, 'Please enter the captcha.');
    captchaInput.focus();
    return;
  }
  say(error, '');
  /** @type {Record<string, string>} */
  const fields = {
    merchant_name: field('merchant-name'),
    username: field('username'),
    nickname: field('nickname'),
    password: byId('password', HTMLInputElement).value,
  };
  if (smsOn) Object.assign(fields, { mobile: mobile.value.trim(), code: smsCode.value.trim() });
  else fields.captcha = captchaInput.value.trim();
  try {
    const { body } = await callJson('/agent/login/register', { method: 'POST', form: fields });
    if (body.code === 0) {
      say(status, `Merchant registered (bid ${body.data.bid}). Opening your admin page…`);
      location.assign(body.data.redirect);
      return;
    }
    say(error, body.msg || 'The registration failed.');
    if (body.code === CODES.SMS_CODE_INVALID) {
      smsCode.value = '';
      smsCode.focus();
    }
  } catch {
    say(error, 'The server could not be reached. Check your connection and try again.');
  }
  // Without SMS the captcha was used up by the attempt: a new one for the next.
  if (!smsOn) captcha.reset();
});
