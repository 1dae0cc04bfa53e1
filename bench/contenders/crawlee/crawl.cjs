// The rendered-pages benchmark crawl (bench/browser.py) with Crawlee's PlaywrightCrawler.
//
//   NODE_PATH=bench/.cache/crawlee/node_modules node crawl.cjs BASE_URL OUT.jsonl CONCURRENCY CHROMIUM
//
// As a Crawlee user writes it: defaults, but for the system's Chromium, a fixed number of
// pages open at once (the autoscaled pool neither grows nor shrinks) and images and fonts
// blocked with Crawlee's own blockRequests (Chromium's Network.setBlockedURLs).
'use strict';
const fs = require('node:fs');
const { Dataset, PlaywrightCrawler, log } = require('crawlee');

const [base, out, concurrency, chromium] = process.argv.slice(2);
const pages = Number(concurrency);

async function main() {
    log.setLevel(log.LEVELS.WARNING);
    const crawler = new PlaywrightCrawler({
        minConcurrency: pages,
        maxConcurrency: pages,
        headless: true,
        launchContext: { launchOptions: { executablePath: chromium } },
        preNavigationHooks: [
            async ({ blockRequests }) => {
                await blockRequests({ urlPatterns: ['.png', '.jpg', '.jpeg', '.gif', '.svg', '.webp', '.woff', '.woff2', '.ttf'] });
            },
        ],
        async requestHandler({ parseWithCheerio, waitForSelector, enqueueLinks, pushData }) {
            await waitForSelector('h1.title', 30000); // the script puts it there with the rest
            const $ = await parseWithCheerio();
            const price = $('span.price').first().text();
            await pushData({
                sku: $('span.sku').first().text(),
                title: $('h1.title').first().text(),
                price: price ? Number(price) : null,
            });
            await enqueueLinks({ selector: 'a' });
        },
    });
    const stats = await crawler.run([`${base}/list/0`]);
    const items = await (await Dataset.open()).export();
    fs.writeFileSync(out, items.map((item) => JSON.stringify(item) + '\n').join(''));
    if (stats.requestsFailed) {
        console.error(`${stats.requestsFailed} requests failed`);
    }
}

main().catch((error) => {
    console.error(error);
    process.exit(1);
});
