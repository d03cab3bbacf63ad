// @ts-check

/**
 * The widget's alert sound (assets/widget.js): the visitor's toggle, remembered in this
 * browser, and a short tone played when the merchant's switch and the toggle are both on.
 */

const SOUND_KEY = 'parley.widget-sound';

/**
 * @param {HTMLButtonElement} soundToggle the visitor's on/off button
 * @param {HTMLElement} main counts the alerts played (data-alerts)
 * @param {() => boolean} merchantOn whether the merchant's setting has the sound on
 */
export function alertSounder(soundToggle, main, merchantOn) {
  let soundOn = (() => {
    try {
      return localStorage.getItem(SOUND_KEY) !== 'off';
    } catch {
      return true;
    }
  })();
  soundToggle.setAttribute('aria-pressed', String(soundOn));
  soundToggle.addEventListener('click', () => {
    soundOn = !soundOn;
    soundToggle.setAttribute('aria-pressed', String(soundOn));
    try {
      localStorage.setItem(SOUND_KEY, soundOn ? 'on' : 'off');
    } catch {
      // not remembered
    }
  });
  /** @type {AudioContext | undefined} */
  let audio;
  /** A short tone (Web Audio: no file to load), when the merchant's switch and the visitor's toggle are on. */
  return function alertSound() {
    if (!merchantOn() || !soundOn) return;
    main.dataset.alerts = String(Number(main.dataset.alerts ?? 0) + 1);
    try {
      audio ??= new AudioContext();
      const tone = audio.createOscillator();
      const gain = audio.createGain();
      tone.frequency.value = 880;
      gain.gain.setValueAtTime(0.08, audio.currentTime);
      gain.gain.exponentialRampToValueAtTime(0.0001, audio.currentTime + 0.25);
      tone.connect(gain).connect(audio.destination);
      tone.start();
      tone.stop(audio.currentTime + 0.25);
    } catch {
      // no audio here (or not allowed yet): the badge and the live region still tell
    }
  };
}
