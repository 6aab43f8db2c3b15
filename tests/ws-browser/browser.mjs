// browser.mjs URL -- load URL#selftest in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core: no browser download) and
// wait for the page's self-test verdict in #result.  Prints the page's log
// and the verdict; exit 0 on "PASS ...", 1 otherwise, 2 when the browser
// cannot start.  Used by tests/integration/test_ws_browser.sh.
import { chromium } from "playwright-core";

const url = process.argv[2];
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const timeout = Number(process.env.BROWSER_TIMEOUT_MS || 30000);

let browser;
try {
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           "--disable-dev-shm-usage"],
    timeout,
  });
} catch (e) {
  console.error("cannot start " + executablePath + ": " + e.message);
  process.exit(2);
}
let code = 1;
try {
  const page = await browser.newPage();
  page.on("console", m => console.log("console: " + m.text()));
  page.on("pageerror", e => console.log("page error: " + e.message));
  const resp = await page.goto(url + "#selftest", { timeout });
  console.log("page: HTTP " + resp.status() + " " + resp.headers()["content-type"]);
  await page.waitForFunction(
    () => document.getElementById("result").textContent !== "not run", null, { timeout });
  const verdict = await page.textContent("#result");
  const log = await page.$$eval("#log div", ds => ds.map(d => d.textContent));
  for (const line of log)
    console.log("log: " + line);
  console.log("verdict: " + verdict);
  code = verdict.startsWith("PASS") ? 0 : 1;
} catch (e) {
  console.error("error: " + e.message);
} finally {
  await browser.close();
}
process.exit(code);
