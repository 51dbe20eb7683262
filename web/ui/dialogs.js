// Modal dialogs: a confirmation for destructive actions and the token form.
// Built on <dialog>, so focus, Escape and the backdrop behave natively.
import { h } from './dom.js';
import { keyIcon } from './icons.js';

// Resolves true when the user confirms. opts: {title, body (nodes or text),
// confirm: button label, cancel: button label, danger: bool}.
export function confirmAction({ title, body, confirm, cancel = 'Back', danger = false }) {
  return new Promise((resolve) => {
    const dialog = h(
      'dialog',
      { class: 'modal', 'aria-labelledby': 'modal-title', 'data-testid': 'confirm-dialog' },
      h(
        'form',
        { method: 'dialog' },
        h('h2', { id: 'modal-title' }, title),
        h('div', { class: 'modal-body' }, body),
        h(
          'div',
          { class: 'modal-actions' },
          h('button', { value: 'cancel', class: 'btn', autofocus: true }, cancel),
          h('button', { value: 'confirm', class: danger ? 'btn btn-danger' : 'btn btn-primary' }, confirm),
        ),
      ),
    );
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'confirm');
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// Resolves to the token typed, or '' when dismissed. Enter in the field
// saves: "Save token" is the form's only submit button (the form's default
// button, which implicit submission presses, is its first submit button in
// tree order), and "Not now" closes the dialog without submitting.
export function askForToken({ refused = false } = {}) {
  return new Promise((resolve) => {
    const input = h('input', {
      type: 'password',
      name: 'token',
      id: 'token-input',
      autocomplete: 'current-password',
      required: true,
      spellcheck: 'false',
    });
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', { id: 'token-title' }, keyIcon(), ' API token'),
      h(
        'p',
        { class: refused ? 'notice notice-bad' : 'modal-body' },
        refused
          ? '✗ tfslurmd refused the stored token (401). Enter a valid one.'
          : 'This tfslurmd asks for a bearer token. It is kept in this browser and sent with every request.',
      ),
      h('label', { for: 'token-input' }, 'Token'),
      input,
      h(
        'div',
        { class: 'modal-actions' },
        h('button', { type: 'button', value: 'cancel', class: 'btn', onclick: () => dialog.close('cancel') }, 'Not now'),
        h('button', { type: 'submit', value: 'save', class: 'btn btn-primary' }, 'Save token'),
      ),
    );
    const dialog = h('dialog', { class: 'modal', 'aria-labelledby': 'token-title', 'data-testid': 'token-dialog' }, form);
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'save' ? input.value.trim() : '');
    });
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
}
