import { writeFileSync } from 'node:fs';
import { renderContractModule } from '../src/pages/contract.js';

/** `npm run contract:print`: regenerates the pages' shared constants module. */
const file = new URL('../src/pages/assets/contract.js', import.meta.url);
writeFileSync(file, renderContractModule());
console.error('src/pages/assets/contract.js written');
