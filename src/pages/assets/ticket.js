// @ts-check
import { byId, logout } from '/assets/api.js';

byId('logout').addEventListener('click', () => logout());
