from eclaw.cli import main

raise SystemExit(main())
