(function(){
function key(td){var v=td.getAttribute('data-v');if(v===null)return td.textContent.toLowerCase();
return v===''?null:parseFloat(v);}
document.querySelectorAll('table.sortable').forEach(function(t){
var ths=t.tHead.rows[0].cells;
Array.prototype.forEach.call(ths,function(th,i){th.addEventListener('click',function(){
var asc=th.getAttribute('aria-sort')!=='ascending';
Array.prototype.forEach.call(ths,function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',asc?'ascending':'descending');
var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
rows.sort(function(x,y){var a=key(x.cells[i]),c=key(y.cells[i]);
if(a===null)return c===null?0:1;if(c===null)return -1;return (a<c?-1:a>c?1:0)*(asc?1:-1);});
rows.forEach(function(r){b.appendChild(r);});});});});
document.documentElement.setAttribute('data-js','ready');
})();
