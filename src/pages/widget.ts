import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Router } from 'express';

/**
 * The widget a merchant embeds (docs/widget.md): the loader at /widget.js, a plain script any
 * page may load from another origin, and the panel at /widget/frame, the page of the iframe the
 * loader adds. Their security headers (CORP cross-origin for the loader, frame-ancestors * for
 * the panel) are set by security-headers.ts from these paths.
 */
export const WIDGET_LOADER_PATH = '/widget.js';
export const WIDGET_FRAME_PATH = '/widget/frame';

/** Gzipped size budgets (bytes): the loader every host page pays for, and all the panel loads once opened. */
export const WIDGET_BUDGETS = { loader: 5 * 1024, panel: 60 * 1024 } as const;

type Words = Record<string, Record<string, string>>;

/**
 * The loader's source with the launcher's words of every language filled in from the one
 * message catalogue (assets/widget-i18n.js, imported as the module the panel loads).
 */
async function loaderSource(assetsDir: string): Promise<string> {
  const catalogue = (await import(pathToFileURL(join(assetsDir, 'widget-i18n.js')).href)) as {
    CATALOGUES: Words;
    LAUNCHER_KEYS: readonly string[];
  };
  const words = Object.fromEntries(
    Object.entries(catalogue.CATALOGUES).map(([lang, all]) => [
      lang,
      Object.fromEntries(catalogue.LAUNCHER_KEYS.map((key) => [key, all[key] ?? ''])),
    ]),
  );
  const source = readFileSync(join(assetsDir, 'widget-loader.js'), 'utf8');
  // JSON is a JavaScript expression; `<` escaped so no catalogue text can close a script element.
  return source.replace('/*WORDS*/ {}', JSON.stringify(words).replace(/</g, '\\u003c'));
}

/** Mounts the loader and the panel's page (rendered by `frame`, the pages' view helper). */
export function mountWidget(router: Router, assetsDir: string, frame: (res: import('express').Response) => void) {
  let loader: Promise<string> | undefined;
  router.get(WIDGET_LOADER_PATH, async (_req, res, next) => {
    try {
      loader ??= loaderSource(assetsDir);
      res.set({
        'Content-Type': 'text/javascript; charset=utf-8',
        // Host pages load it on every visit: cached briefly, so a deploy reaches them within minutes.
        'Cache-Control': 'public, max-age=300',
      });
      res.send(await loader);
    } catch (error) {
      loader = undefined;
      next(error);
    }
  });
  router.get(WIDGET_FRAME_PATH, (_req, res) => frame(res));
}
