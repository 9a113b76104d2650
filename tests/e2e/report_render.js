// Renders an HTML file in headless Chromium, offline: every request that
// is not the file itself is blocked and reported. Prints one JSON line
// {errors, requests, height} and writes a full-page screenshot.
// node report_render.js PAGE.html OUT.png [--print OUT.pdf] [--pieces]
// Chromium: $CHROMIUM or /usr/bin/chromium; playwright-core: on NODE_PATH
// (report_e2e passes the tests' own, from target/test-tools/node).
const path = require('path');
const { chromium } = require('playwright-core');

const [page_path, png] = process.argv.slice(2);
const pdf = process.argv.includes('--print') ? process.argv[process.argv.indexOf('--print') + 1] : null;

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const errors = [];
  const requests = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.on('pageerror', (e) => errors.push('pageerror: ' + String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    const url = 'file://' + path.resolve(page_path);
    await page.route('**/*', (r) => {
      const u = r.request().url();
      if (u === url) return r.continue();
      requests.push(u);
      return r.abort();
    });
    await page.goto(url, { waitUntil: 'load' });
    const height = await page.evaluate(() => document.body.scrollHeight);
    const svgs = await page.evaluate(() => document.querySelectorAll('svg').length);
    await page.screenshot({ path: png, fullPage: true });
    if (process.argv.includes('--pieces')) {
      // The page in screens of 1500 px, for looking at.
      for (let y = 0, k = 1; y < height; y += 1500, k++) {
        const clip = { x: 0, y, width: 1200, height: Math.min(1500, height - y) };
        await page.screenshot({ path: png.replace(/\.png$/, `.${k}.png`), fullPage: true, clip });
      }
    }
    if (pdf) {
      await page.emulateMedia({ media: 'print' });
      await page.pdf({ path: pdf, format: 'A4', printBackground: true });
    }
    console.log(JSON.stringify({ errors, requests, height, svgs }));
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(String(e)); process.exit(1); });
