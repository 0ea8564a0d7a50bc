import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import '@mantine/core/styles.css';
import { App } from './App';
import { signIn } from './api/client';

/** The token in the URL `strata serve` prints (`#token=...`): read once, then wiped. */
function tokenFromUrl(): string | null {
  const m = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (!m?.[1]) return null;
  history.replaceState(null, '', window.location.pathname + window.location.search);
  return decodeURIComponent(m[1]);
}

const token = tokenFromUrl();
// A wrong token falls through to the sign-in form.
const ready = token ? signIn(token).catch(() => undefined) : Promise.resolve();
void ready.then(() => {
  const root = document.getElementById('root');
  if (root) {
    createRoot(root).render(
      <StrictMode>
        <App />
      </StrictMode>,
    );
  }
});
