// jsdom has <dialog> but not its methods: a stand-in with what the page relies on
// (open, and a `close` event on closing). Focus and the inert page behind are the browser's.

export function standInForDialog(): void {
  const proto = HTMLDialogElement.prototype;
  if (typeof proto.showModal === "function") return;
  proto.showModal = function showModal(this: HTMLDialogElement) {
    this.open = true;
  };
  proto.close = function close(this: HTMLDialogElement) {
    if (!this.open) return;
    this.open = false;
    this.dispatchEvent(new Event("close"));
  };
}
