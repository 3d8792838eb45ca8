"""A saved run used: its policy loaded to act (policy), evaluated in its env by ``her-run load=PATH``
(evaluate) and recorded as videos (video). Training (:mod:`her_rl.run`) never imports this folder."""
